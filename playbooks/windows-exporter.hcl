# windows-exporter: run windows_exporter as a service with WMCO's
# collectors and port, and publish it to the cluster as WMCO does (the
# windows-exporter Service, without selector, and an EndpointSlice of the
# node's address) so Prometheus can scrape every Windows node through it.
# A windows_exporter service someone else installed is left as it is.

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster; null: KUBECONFIG or the in-cluster config."
}

variable "node_name" {
  type        = string
  description = "The node's name."
}

variable "node_ip" {
  type        = string
  description = "The node's address, published as the exporter's endpoint."
}

variable "namespace" {
  type        = string
  description = "Namespace of the windows-exporter Service and the nodes' EndpointSlices."
}

variable "port" {
  type        = number
  default     = 9182
  description = "Port windows_exporter listens on (WMCO's, the exporter's default)."
}

variable "collectors" {
  type        = list(string)
  default     = ["cpu", "logical_disk", "net", "os", "service", "system", "container", "memory", "cpu_info"]
  description = "windows_exporter --collectors.enabled (WMCO's list)."
}

variable "publish" {
  type        = bool
  default     = true
  description = "Publish the node's endpoint in the windows-exporter Service (needs cluster rights: false in a node-only join)."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the service's recovery actions (restart on failure); false leaves them as they are."
}

play "windows-exporter" {
  hosts = "windows"

  task "exporter log directory" {
    win_directory {
      path = "C:\\var\\log\\windows_exporter"
    }
  }

  task "exporter service" {
    win_service {
      name = "windows_exporter"
      path = "C:\\k\\windows_exporter.exe"
      args = [
        "--collectors.enabled", join(",", var.collectors),
        "--web.listen-address", ":${var.port}",
        "--log.level", "info",
        "--log.file", "C:\\var\\log\\windows_exporter\\windows_exporter.log",
      ]
      start_mode      = "automatic"
      state           = "running"
      recovery        = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
      only_if_managed = true
    }
  }

  task "metrics endpoint" {
    when = var.publish
    k8s_metrics_endpoint {
      kubeconfig = var.kubeconfig
      namespace  = var.namespace
      node_name  = var.node_name
      address    = var.node_ip
      port       = var.port
    }
  }
}
