# Shows each host's variables, for the HCL inventory tests.
play "vars" {
  hosts = "all"

  task "show" {
    print {
      msg = "${host.name}: ${jsonencode(host.vars)} groups=${join(",", host.groups)}"
    }
  }
}
