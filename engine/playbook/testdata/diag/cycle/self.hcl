include "me" {
  source = "./self.hcl"
}
