include "web" {
  source = "child.hcl"
  vars = {
    port = 8080
  }
}

play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = include.web.address
    }
  }
}
