# preflight: check, before anything is changed, that each host can join:
# its node name, Windows build, clock against the API server's, free disk
# for the payload, services someone else installed, and whether it reaches
# the API server. One error per problem; nothing on the host changes.

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster; null: KUBECONFIG or the in-cluster config."
}

variable "kubeconfig_data" {
  type        = string
  default     = null
  sensitive   = true
  description = "A kubeconfig's content instead of kubeconfig (a node-only join's bootstrap kubeconfig)."
}

variable "adopt_services" {
  type        = list(string)
  default     = []
  description = "Services someone else installed that the join takes over (join's adopt_kubelet)."
}

variable "adopt_wmco" {
  type        = bool
  default     = false
  description = "Take over the services WMCO created on a host it configured (join's adopt_wmco)."
}

variable "payload_dir" {
  type        = string
  description = "Directory on the machine running wsu holding the payload and its manifest.json."
}

variable "node_name" {
  type        = string
  default     = null
  description = "Node name override; null: the host name, lower-cased (as configure-kubelet)."
}

variable "api_server" {
  type        = string
  default     = null
  description = "API server URL nodes use; null: the cluster's (OpenShift api-int, kubeadm cluster-info, else wsu's own)."
}

variable "manage_containerd" {
  type        = bool
  default     = true
  description = "Whether join installs containerd: if so, a containerd service wsu did not install is a problem; if not, it is expected."
}

variable "min_windows_build" {
  type        = number
  default     = 17763
  description = "Oldest Windows build accepted (17763: Windows Server 2019; 20348: Windows Server 2022)."
}

variable "max_clock_skew" {
  type        = number
  default     = 5
  description = "Seconds the host's clock may differ from the API server's."
}

variable "disk_reserve" {
  type        = number
  default     = 1073741824
  description = "Bytes that must stay free on C: beyond the payload (logs, the first images)."
}

locals {
  manifest = jsondecode(file("${var.payload_dir}/manifest.json"))
  payload  = { for c in local.manifest.components : c.destination => "${var.payload_dir}/${c.file}" }
}

play "preflight" {
  hosts = "windows"

  task "preflight" {
    win_preflight {
      kubeconfig      = var.kubeconfig
      kubeconfig_data = var.kubeconfig_data
      adopt           = var.adopt_services
      adopt_wmco      = var.adopt_wmco
      node_name       = coalesce(var.node_name, lower(host.facts.hostname))
      min_build       = var.min_windows_build
      services        = concat(["kubelet"], var.manage_containerd ? ["containerd"] : [])
      payload         = local.payload
      disk_path       = "C:\\"
      disk_reserve    = var.disk_reserve
      max_clock_skew  = var.max_clock_skew
      api_server      = var.api_server
    }
  }
}

# No kubelet service of wsu's yet: no pod has run under this configuration,
# so CNI state on the node is a former installation's. A host WMCO
# configured runs its pods under WMCO's kubelet: not a first
# configuration. False when the preflight did not run (--tags): nothing is
# cleared on a guess.
output "first_configuration" {
  description = "Whether the node has no kubelet service from an earlier join, wsu's or WMCO's (join clears stale CNI state then)."
  value       = try(!contains(task.preflight.installed, "kubelet") && !task.preflight.wmco, false)
}

output "wmco" {
  description = "Whether the host is one WMCO configured, its services adopted (adopt_wmco). False when the preflight did not run."
  value       = try(task.preflight.wmco, false)
}
