play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = include.web.address
    }
  }
}

include "web" {
  source = "child.hcl"
}
