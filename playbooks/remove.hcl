# remove: deconfigure Windows workers and return the hosts to their
# pre-join state: cordon and drain, stop and delete the services wsu
# created (those whose description carries its "Managed by wsu" marker) in
# reverse order (waiting for their processes), remove the HNS networks
# (each removal may drop the connection: the engine reconnects), the
# payload and log directories (and the parents join created, when empty)
# and the environment wsu set, then the Node.
#
# The Node is touched only when it is a Windows Node wsu joined
# (annotation wsu.dev/owner = node_owner, and the UID node_uid when given):
# any other Node of that name (a typo, a control-plane Node) fails the run
# at its first task, before anything changes. A Node that does not exist
# is skipped, so remove runs again after a partial join or removal.

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster modules (cordon, drain, Node deletion); null: KUBECONFIG or the in-cluster config."
}

variable "node_name" {
  type        = string
  default     = null
  description = "Node name override used at join; default: the host name, lower-cased."
}

variable "node_owner" {
  type        = string
  default     = "wsu"
  description = "join's node_owner: the wsu.dev/owner annotation the Node must carry (the controller's windowsinstance/NAMESPACE/NAME)."
}

variable "node_uid" {
  type        = string
  default     = null
  description = "UID the Node must have (the controller passes the one it recorded at join); null: any."
}

variable "node_registered" {
  type        = bool
  default     = true
  description = "false: the host never registered a Node (the controller passes it for an instance with no Node recorded): the host is deconfigured and no Node or per-node cluster object is touched."
}

variable "platform" {
  type        = string
  default     = null
  description = "The platform given at join, for the node name: VSphere nodes are named by their FQDN, AWS and GCP nodes by the host name their instance metadata service gives; Azure: also removes cloud-node-manager's identity (join reads the platform from the cluster on OpenShift; remove does not, so set it, or node_name)."
}

variable "instance_metadata_url" {
  type        = string
  default     = null
  description = "Base URL of the instance metadata service on AWS and GCP (join's); null: the platform's."
}

variable "drain_force" {
  type        = bool
  default     = true
  description = "Drain evicts pods no controller manages too (WMCO's default; nothing recreates them)."
}

variable "drain_delete_emptydir_data" {
  type        = bool
  default     = true
  description = "Drain evicts pods with emptyDir volumes too, losing that data (WMCO's default)."
}

variable "drain_timeout" {
  type        = number
  default     = 600
  description = "Seconds the drain may take (evictions honour PodDisruptionBudgets)."
}

variable "version_annotation" {
  type        = string
  default     = null
  description = "Node annotation join set with the payload version; removed before the Node is deleted. null: as join, by cluster_flavour (windowsmachineconfig.openshift.io/version on OpenShift, wsu.dev/version elsewhere)."
}

variable "cluster_flavour" {
  type        = string
  default     = "openshift"
  description = "openshift or kubeadm (join's): where the node's windows-exporter endpoint was published."
}

variable "metrics_namespace" {
  type        = string
  default     = null
  description = "Namespace join published the node's windows-exporter EndpointSlice in (join's metrics_namespace); null: as join, by cluster_flavour."
}

variable "cloud_node_manager_namespace" {
  type        = string
  default     = null
  description = "Azure: the namespace join put the node's cloud-node-manager ServiceAccount in (join's); null: join's default."
}

variable "firewall_ports" {
  type        = map(string)
  default     = { "wsu-kubelet" = "10250", "wsu-windows-exporter" = "9182", "wsu-vxlan" = "4789/udp" }
  description = "The firewall rules join opened, by name (join's firewall_ports and network_firewall_ports; the values are not read); only those carrying wsu's group are deleted."
}

variable "defender_exclusions" {
  type        = map(list(string))
  default     = { Processes = ["C:\\k\\containerd\\containerd.exe"], Paths = ["C:\\ProgramData\\containerd"] }
  description = "The Windows Defender exclusions join wrote as local policy (join's defender_excluded_processes and defender_excluded_paths), by list; removed with containerd (remove_containerd). The Exclusions_Processes/Exclusions_Paths switches stay: other exclusions may use them."
}

variable "kube_proxy_identity" {
  type        = string
  default     = "own"
  description = "join's kube_proxy_identity on kubeadm: \"own\" removes kube-proxy's per-node identity from a node joined with network ovn-hybrid (the Node's wsu.dev/network says); \"kubelet\" when join ran with that."
}

variable "remove_containerd" {
  type        = bool
  default     = true
  description = "Also remove the containerd service, if wsu installed it (a containerd without wsu's marker is kept either way)."
}

locals {
  version_annotation = var.version_annotation != null ? var.version_annotation : (var.cluster_flavour == "openshift" ? "windowsmachineconfig.openshift.io/version" : "wsu.dev/version")
  # Stop order from the reference: cloud-node-manager (Azure), exporter,
  # kube-proxy, hybrid-overlay, kubelet, then the runtime.
  services = concat(["cloud-node-manager", "windows_exporter", "kube-proxy", "hybrid-overlay-node", "csi-proxy", "kubelet"], var.remove_containerd ? ["containerd"] : [])
  # The Node exists and is this host's ("node owner" checked it).
  node_exists = var.node_registered && try(task["node owner"].exists, false)
  node = var.node_name != null ? var.node_name : (
    var.platform == "VSphere" ? lower(host.facts.fqdn) : coalesce(try(task["instance metadata name"].node_name, null), lower(host.facts.hostname))
  )
}

# The name join registered on AWS and GCP, read on the node as join does.
play "cloud node name" {
  hosts = "windows"

  task "instance metadata name" {
    when = var.node_name == null && contains(["AWS", "GCP"], coalesce(var.platform, "None"))
    win_instance_metadata {
      platform = var.platform
      endpoint = var.instance_metadata_url
    }
  }
}

play "drain" {
  hosts = "windows"

  # The Node must be this host's (see the top); a Node of another owner, or
  # not a Windows Node, fails here.
  task "node owner" {
    when = var.node_registered
    k8s_node_owner {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
    }
  }

  # The network join recorded on the Node (wsu.dev/network): what else
  # there is to remove.
  task "joined network" {
    when = local.node_exists
    k8s_node {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
    }
  }

  # Prometheus stops scraping the node before its exporter stops.
  task "metrics endpoint" {
    when = var.node_registered
    k8s_metrics_endpoint {
      kubeconfig = var.kubeconfig
      namespace  = coalesce(var.metrics_namespace, var.cluster_flavour == "openshift" ? "openshift-windows-machine-config-operator" : "kube-system")
      node_name  = local.node
      state      = "absent"
    }
  }

  task "cordon" {
    when = local.node_exists
    k8s_node_cordon {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
    }
  }

  task "drain" {
    when = local.node_exists
    k8s_node_drain {
      kubeconfig           = var.kubeconfig
      name                 = local.node
      owner                = var.node_owner
      uid                  = var.node_uid
      timeout              = var.drain_timeout
      force                = var.drain_force
      delete_emptydir_data = var.drain_delete_emptydir_data
    }
  }
}

play "deconfigure" {
  hosts = "windows"

  # One task per service keeps the order: removal waits for the process.
  # Only services wsu created go: a same-named one it did not (the site's
  # own containerd or exporter) stays, with a warning.
  task "services" {
    for_each = { for i, s in local.services : format("%02d-%s", i, s) => s }
    win_service {
      name            = each.value
      state           = "absent"
      only_if_managed = true
    }
  }

  # kube-proxy's own identity (join with network ovn-hybrid on kubeadm,
  # kube_proxy_identity "own"): its files, binding and ServiceAccount.
  task "kube-proxy identity" {
    when = var.node_registered && var.cluster_flavour == "kubeadm" && try(task["joined network"].annotations["wsu.dev/network"], "") == "ovn-hybrid" && var.kube_proxy_identity == "own"
    k8s_node_identity {
      kubeconfig   = var.kubeconfig
      node_name    = local.node
      namespace    = "kube-system"
      name         = "kube-proxy"
      cluster_role = "system:node-proxier"
      state        = "absent"
    }
  }

  # Azure's cloud-node-manager identity (join's k8s_node_identity): its
  # files, RBAC and ServiceAccount. Only on Azure: elsewhere wsu has no
  # rights to read them (deploy/rbac/azure-cloud-node-manager.yaml).
  task "cloud-node-manager identity" {
    when = var.node_registered && coalesce(var.platform, "None") == "Azure"
    k8s_node_identity {
      kubeconfig = var.kubeconfig
      node_name  = local.node
      namespace  = coalesce(var.cloud_node_manager_namespace, var.metrics_namespace, var.cluster_flavour == "openshift" ? "openshift-windows-machine-config-operator" : "kube-system")
      state      = "absent"
    }
  }

  task "leftover shims" {
    win_kill {
      image = "containerd-shim-runhcs-v1.exe"
    }
  }

  task "overlay network" {
    win_hns_network {
      name  = "OVNKubernetesHybridOverlayNetwork"
      state = "absent"
    }
  }

  task "base network" {
    win_hns_network {
      name  = "BaseOVNKubernetesHybridOverlayNetwork"
      state = "absent"
    }
  }

  task "directories" {
    for_each = toset(["C:\\k", "C:\\var\\lib\\cni", "C:\\var\\log\\kubelet", "C:\\var\\log\\kube-proxy", "C:\\var\\log\\hybrid-overlay", "C:\\var\\log\\csi-proxy", "C:\\var\\log\\containerd", "C:\\var\\log\\windows_exporter", "C:\\var\\lib\\kubelet"])
    win_directory {
      path  = each.key
      state = "absent"
    }
  }

  # The parents join created: other software may keep files there, so each
  # goes only if empty. Children first (for_each runs in key order).
  task "parent directories" {
    for_each = { for i, d in ["C:\\var\\log", "C:\\var\\lib", "C:\\var", "C:\\Temp"] : format("%02d-%s", i, d) => d }
    win_directory {
      path          = each.value
      state         = "absent"
      only_if_empty = true
    }
  }

  task "path" {
    win_path {
      entry = "C:\\k"
      state = "absent"
    }
  }

  task "proxy settings" {
    for_each = toset(["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"])
    win_env {
      name  = each.key
      state = "absent"
    }
  }

  task "defender exclusions" {
    for_each = { for e in flatten([for list, names in var.defender_exclusions : [for n in names : { list = list, name = n }]]) : "${e.list}/${e.name}" => e if var.remove_containerd }
    win_registry {
      key   = "HKLM\\SOFTWARE\\Policies\\Microsoft\\Windows Defender\\Exclusions\\${each.value.list}"
      name  = each.value.name
      state = "absent"
    }
  }

  task "firewall rules" {
    for_each = var.firewall_ports
    win_firewall_rule {
      name            = each.key
      state           = "absent"
      only_if_managed = true
    }
  }
}

play "node" {
  hosts = "windows"

  task "version annotation" {
    when = local.node_exists
    k8s_node {
      kubeconfig  = var.kubeconfig
      name        = local.node
      owner       = var.node_owner
      uid         = var.node_uid
      annotations = { (local.version_annotation) = null }
    }
  }

  task "delete node" {
    when = local.node_exists
    k8s_node_delete {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
    }
  }
}
