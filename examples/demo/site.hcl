# A small site playbook that runs anywhere (`--local`): it lays out a node
# directory tree under var.root the way the Windows playbooks lay out C:\k.

variable "root" {
  type        = string
  description = "Directory the demo writes under (absolute)."
  validation {
    condition     = startswith(var.root, "/")
    error_message = "The root must be an absolute path."
  }
}

variable "cluster_dns" {
  type        = string
  default     = "10.96.0.10"
  description = "Cluster DNS address written into the kubelet config."
}

variable "max_pods" {
  type    = number
  default = 250
}

variable "bootstrap_token" {
  type      = string
  default   = "abcdef.0123456789abcdef"
  sensitive = true
}

locals {
  dirs = toset(["cni", "cni/config", "etc", "logs"])
}

play "layout" {
  hosts = "all"

  task "node directories" {
    for_each = local.dirs
    directory {
      path = "${var.root}/${each.key}"
    }
  }

  task "kubelet_config" {
    file {
      path = "${var.root}/etc/kubelet.conf"
      content = templatefile("templates/kubelet.conf.tftpl", {
        cluster_dns = var.cluster_dns
        max_pods    = var.max_pods
      })
      mode = "0644"
    }
    notify = ["restart kubelet"]
  }

  task "bootstrap_kubeconfig" {
    file {
      path    = "${var.root}/etc/bootstrap-kubeconfig"
      content = "token: ${var.bootstrap_token}\n"
      mode    = "0600"
    }
  }

  task "marker" {
    command {
      argv    = ["touch", "${var.root}/logs/installed"]
      creates = "${var.root}/logs/installed"
    }
  }

  task "check" {
    assert {
      that         = [task.kubelet_config.size > 0]
      fail_message = "the kubelet config is empty"
    }
  }

  task "report" {
    print {
      msg = "kubelet.conf sha256 ${task.kubelet_config.sha256}"
    }
  }

  handler "restart kubelet" {
    command {
      argv = ["touch", "${var.root}/logs/kubelet-restarted"]
    }
  }
}
