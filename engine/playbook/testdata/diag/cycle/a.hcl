# a.hcl includes b.hcl, which includes a.hcl again.
include "b" {
  source = "b.hcl"
}
