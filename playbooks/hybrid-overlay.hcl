# hybrid-overlay: OVN-Kubernetes' hybrid overlay on the node. Starting it
# reconfigures the node's network, which may drop the connection for a
# while; the engine reconnects and carries on.
#
# It has its own per-node identity, as WMCO gives it: with the kubelet's
# credentials (C:\k\kubeconfig, system:node:<node>) it asks for a client
# certificate for system:ovn-node:<node> (signer
# kubernetes.io/kube-apiserver-client, 24 h, kept in C:\k\cni\config and
# renewed by itself), which the cluster's OVN-Kubernetes identity CSR
# approver (ovnkube-identity) approves, and then talks to --k8s-apiserver
# as that identity, verifying it with C:\k\bootstrap-ca.crt
# (extract-ignition writes it).

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster modules (the OVN annotations); null: KUBECONFIG or the in-cluster config."
}

variable "node_name" {
  type        = string
  description = "The Node's name."
}

variable "api_server" {
  type        = string
  description = "API server URL the node uses (hybrid-overlay-node --k8s-apiserver); C:\\k\\bootstrap-ca.crt must verify it."
}

variable "service_cidr" {
  type        = string
  default     = "172.30.0.0/16"
  description = "Cluster service network: excluded from outbound NAT and routed through the overlay."
}

variable "hybrid_overlay_vxlan_port" {
  type        = number
  default     = null
  description = "--hybrid-overlay-vxlan-port, when the cluster uses a non-default VXLAN port."
}

variable "network_timeout" {
  type        = number
  default     = 600
  description = "Seconds to wait for the OVN annotations and HNS networks."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the hybrid-overlay-node service's recovery actions (restart on failure); false leaves them as they are."
}

play "hybrid-overlay" {
  hosts = "windows"

  # The OVN-Kubernetes master assigns the node's subnet once the Node exists.
  task "node subnet" {
    k8s_wait_annotation {
      kubeconfig = var.kubeconfig
      node       = var.node_name
      annotation = "k8s.ovn.org/hybrid-overlay-node-subnet"
      timeout    = var.network_timeout
    }
  }

  task "hybrid-overlay service" {
    win_service {
      name = "hybrid-overlay-node"
      path = "C:\\k\\hybrid-overlay-node.exe"
      args = concat(
        ["--node", var.node_name, "--bootstrap-kubeconfig=C:\\k\\kubeconfig", "--cert-dir=C:\\k\\cni\\config", "--cert-duration=24h",
        "--windows-service", "--logfile", "C:\\var\\log\\hybrid-overlay\\hybrid-overlay.log", "--k8s-apiserver=${var.api_server}", "--k8s-cacert", "C:\\k\\bootstrap-ca.crt"],
        var.hybrid_overlay_vxlan_port != null ? ["--hybrid-overlay-vxlan-port", tostring(var.hybrid_overlay_vxlan_port)] : [],
      )
      dependencies = ["kubelet"]
      start_mode   = "automatic"
      state        = "running"
      recovery     = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
    }
  }

  task "base network" {
    win_wait {
      hns_network = "BaseOVNKubernetesHybridOverlayNetwork"
      timeout     = var.network_timeout
    }
  }

  task "overlay network" {
    win_wait {
      hns_network = "OVNKubernetesHybridOverlayNetwork"
      timeout     = var.network_timeout
    }
  }

  task "gateway mac" {
    k8s_wait_annotation {
      kubeconfig = var.kubeconfig
      node       = var.node_name
      annotation = "k8s.ovn.org/hybrid-overlay-distributed-router-gateway-mac"
      timeout    = var.network_timeout
    }
  }

  task "overlay" {
    win_hns_network {
      name = "OVNKubernetesHybridOverlayNetwork"
    }
  }

  # Written only when it changes: containerd reads it for every pod.
  task "cni config" {
    win_file {
      path = "C:\\k\\cni\\config\\cni.conf"
      content = templatefile("templates/cni.conf.tftpl", {
        node_subnet      = task["node subnet"].value
        service_cidr     = var.service_cidr
        provider_address = task.overlay.management_ip
      })
    }
  }
}

output "node_subnet" {
  value = try(task["node subnet"].value, null)
}
