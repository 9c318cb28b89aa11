variable "root" {
  type = string
}

variable "password" {
  type      = string
  default   = "hunter2-default"
  sensitive = true
}

play "golden" {
  hosts = "all"

  task "dirs" {
    for_each = toset(["a", "b"])
    directory {
      path = "${var.root}/${each.key}"
    }
  }

  task "config" {
    file {
      path    = "${var.root}/a/config.txt"
      content = "hello\n"
      mode    = "0640"
    }
    notify = ["reload"]
  }

  task "secret" {
    file {
      path    = "${var.root}/a/secret.txt"
      content = var.password
    }
  }

  task "probe" {
    command {
      argv = ["echo", "probe"]
    }
  }

  task "from_probe" {
    print {
      msg = "probe said ${task.probe.stdout}"
    }
  }

  task "never" {
    when = false
    print {
      msg = "skipped"
    }
  }

  handler "reload" {
    command {
      argv    = ["touch", "${var.root}/reloaded"]
      creates = "${var.root}/reloaded"
    }
  }
}
