# csi-proxy: lets CSI node plugins in containers manage the host's storage.

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the csi-proxy service's recovery actions (restart on failure); false leaves them as they are."
}

play "csi-proxy" {
  hosts = "windows"

  task "csi-proxy service" {
    win_service {
      name       = "csi-proxy"
      path       = "C:\\k\\csi-proxy.exe"
      args       = ["-log_file=C:\\var\\log\\csi-proxy\\csi-proxy.log", "-logtostderr=false", "-windows-service", "--v=2"]
      start_mode = "automatic"
      state      = "running"
      recovery   = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
    }
  }
}
