# configure-kubelet: C:\k\kubelet.conf and the kubelet service, as WMCO
# configures them (config file generation; the removed --network-plugin /
# --cni-* flags are not used: containerd's config holds the CNI paths).
# On a kubeadm cluster join passes the whole config instead (kubelet_config,
# from k8s_kubelet_config): the cluster's own, as kubeadm join writes it.

variable "node_name" {
  type        = string
  default     = null
  description = "Node name override (--hostname-override); default: the host name, lower-cased."
}

variable "node_ip" {
  type        = string
  default     = null
  description = "Node IP (--node-ip); default: the IPv4 of the interface holding the default route."
}

variable "cluster_dns" {
  type        = list(string)
  default     = ["172.30.0.10"]
  description = "Cluster DNS service addresses (clusterDNS)."
}

variable "cluster_domain" {
  type        = string
  default     = "cluster.local"
  description = "Cluster DNS domain (clusterDomain in the kubelet config)."
}

variable "max_pods" {
  type        = number
  default     = 250
  description = "Most pods the node runs (maxPods in the kubelet config)."
}

variable "kubelet_verbosity" {
  type        = number
  default     = 2
  description = "kubelet --v."
}

variable "extra_kubelet_args" {
  type        = list(string)
  default     = []
  description = "Appended to the kubelet command line, e.g. [\"--feature-gates=X=true\"]."
}

variable "cloud_provider" {
  type        = string
  default     = null
  description = "--cloud-provider (from the ignition on OpenShift)."
}

variable "cloud_config" {
  type        = string
  default     = null
  description = "--cloud-config path on the node (from the ignition on OpenShift)."
}

variable "node_labels" {
  type        = list(string)
  default     = ["node.openshift.io/os_id=Windows"]
  description = "--node-labels the kubelet registers with (WMCO's OpenShift label by default; join passes [] on kubeadm clusters); [] leaves the flag out."
}

variable "node_taints" {
  type        = list(object({ key = string, value = string, effect = string }))
  default     = [{ key = "os", value = "Windows", effect = "NoSchedule" }]
  description = "Taints the kubelet registers the Node with: registerWithTaints in the template's config, or --register-with-taints beside kubelet_config (as kubeadm passes nodeRegistration.taints). WMCO's os=Windows:NoSchedule by default; [] registers none."
}

variable "kubelet_config" {
  type        = string
  default     = null
  description = "The whole kubelet configuration (YAML or JSON), written to C:\\k\\kubelet.conf as given; join passes k8s_kubelet_config's on kubeadm clusters. null: WMCO's template (templates/kubelet.conf.tftpl) with cluster_dns, cluster_domain, max_pods and node_taints."
}

variable "log_runner_flags" {
  type        = list(string)
  default     = []
  description = "kube-log-runner's own flags (rotation, flushing), placed before the binary it runs; join builds them from log_file_size, log_file_age and log_flush_interval."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the kubelet service's recovery actions (restart on failure); false leaves them as they are."
}

locals {
  node_name = coalesce(var.node_name, lower(host.facts.hostname))
  node_ip   = coalesce(var.node_ip, host.facts.ipv4)
  # A taint value YAML would read as another type (true, 1, "") is quoted
  # in the template; plain words stay bare, as WMCO writes them.
  template_taints = [for t in var.node_taints : {
    key    = t.key
    effect = t.effect
    value  = can(regex("^[A-Za-z][A-Za-z0-9_.-]*$", t.value)) && !contains(["true", "false", "yes", "no", "on", "off", "y", "n", "null"], lower(t.value)) ? t.value : jsonencode(t.value)
  }]
  # kubeadm's --register-with-taints form: key=value:effect, key:effect.
  taint_flag = join(",", [for t in var.node_taints : t.value == "" ? "${t.key}:${t.effect}" : "${t.key}=${t.value}:${t.effect}"])
  # kube-log-runner's own flags come before the binary it runs (extra
  # kubelet args would land after kubelet.exe).
  kubelet_args = concat(
    ["-log-file=C:\\var\\log\\kubelet\\kubelet.log"],
    var.log_runner_flags,
    [
      "C:\\k\\kubelet.exe",
      "--config=C:\\k\\kubelet.conf",
      "--bootstrap-kubeconfig=C:\\k\\bootstrap-kubeconfig",
      "--kubeconfig=C:\\k\\kubeconfig",
      "--cert-dir=c:\\var\\lib\\kubelet\\pki\\",
      "--windows-service",
    ],
    length(var.node_labels) > 0 ? ["--node-labels=${join(",", var.node_labels)}"] : [],
    [
      "--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS",
      "--v=${var.kubelet_verbosity}",
      "--hostname-override=${local.node_name}",
      "--node-ip=${local.node_ip}",
    ],
    var.cloud_provider != null ? ["--cloud-provider=${var.cloud_provider}"] : [],
    var.cloud_config != null ? ["--cloud-config=${var.cloud_config}"] : [],
    var.kubelet_config != null && length(var.node_taints) > 0 ? ["--register-with-taints=${local.taint_flag}"] : [],
    var.extra_kubelet_args,
  )
}

play "configure-kubelet" {
  hosts = "windows"

  task "kubelet config" {
    win_file {
      path = "C:\\k\\kubelet.conf"
      content = var.kubelet_config != null ? var.kubelet_config : templatefile("templates/kubelet.conf.tftpl", {
        cluster_dns    = var.cluster_dns
        cluster_domain = var.cluster_domain
        max_pods       = var.max_pods
        node_taints    = local.template_taints
      })
    }
    notify = ["restart kubelet"]
  }

  # WMCO wraps the kubelet in kube-log-runner so its log rotates to a file.
  task "kubelet service" {
    win_service {
      name         = "kubelet"
      path         = "C:\\k\\kube-log-runner.exe"
      args         = local.kubelet_args
      display_name = "kubelet"
      dependencies = ["containerd"]
      start_mode   = "automatic"
      state        = "running"
      recovery     = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
    }
  }

  handler "restart kubelet" {
    win_service {
      name  = "kubelet"
      state = "restarted"
    }
  }
}

output "node_name" {
  value = local.node_name
}

output "node_ip" {
  value = local.node_ip
}
