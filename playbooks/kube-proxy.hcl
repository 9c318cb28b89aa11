# kube-proxy: kernelspace (HNS) mode on the hybrid-overlay network, with a
# source VIP endpoint, configured through C:\k\kube-proxy.conf, run under
# kube-log-runner so its log goes to C:\var\log\kube-proxy (as WMCO).

variable "node_name" {
  type        = string
  description = "The Node's name (kube-proxy's hostnameOverride)."
}

variable "node_subnet" {
  type        = string
  description = "The node's hybrid-overlay subnet (clusterCIDR)."
}

variable "log_runner_flags" {
  type        = list(string)
  default     = []
  description = "kube-log-runner's own flags (rotation, flushing), placed before the binary it runs; join builds them from log_file_size, log_file_age and log_flush_interval."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the kube-proxy service's recovery actions (restart on failure); false leaves them as they are."
}

play "kube-proxy" {
  hosts = "windows"

  task "source vip" {
    win_hns_endpoint {
      name    = "VIPEndpoint"
      network = "OVNKubernetesHybridOverlayNetwork"
    }
  }

  task "kube-proxy config" {
    win_file {
      path = "C:\\k\\kube-proxy.conf"
      content = templatefile("templates/kube-proxy.conf.tftpl", {
        source_vip   = task["source vip"].ip
        cluster_cidr = var.node_subnet
        node_name    = var.node_name
      })
    }
    notify = ["restart kube-proxy"]
  }

  task "kube-proxy service" {
    win_service {
      name         = "kube-proxy"
      path         = "C:\\k\\kube-log-runner.exe"
      args         = concat(["-log-file=C:\\var\\log\\kube-proxy\\kube-proxy.log"], var.log_runner_flags, ["C:\\k\\kube-proxy.exe", "--config", "C:\\k\\kube-proxy.conf", "--windows-service"])
      display_name = "kube-proxy"
      dependencies = ["hybrid-overlay-node"]
      start_mode   = "automatic"
      state        = "running"
      recovery     = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
    }
  }

  handler "restart kube-proxy" {
    win_service {
      name  = "kube-proxy"
      state = "restarted"
    }
  }
}
