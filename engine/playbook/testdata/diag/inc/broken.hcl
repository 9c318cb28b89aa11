variable "name" {}
play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = var.nmae
    }
  }
}
