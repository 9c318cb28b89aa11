include "broken" {
  source = "broken.hcl"
}
