include "web" {
  source = "child.hcl"
}

play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = include.web.adress
    }
  }
}
