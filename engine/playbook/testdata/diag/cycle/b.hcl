include "a" {
  source = "a.hcl"
}
