include "web" {
  source = "child.hcl"
  vars = {
    prot = 8080
  }
}
