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

variable "identity" {
  type        = string
  default     = "kubelet"
  description = "Whose credentials kube-proxy uses: kubelet (the kubelet's kubeconfig, C:\\k\\kubeconfig, system:node:<name>; as WMCO on OpenShift) or own (kubeadm: a ServiceAccount per node bound to system:node-proxier, with a renewed Node-bound token; the Node authorizer does not let nodes list EndpointSlices). own needs deploy/rbac/kubeadm-kube-proxy.yaml."
  validation {
    condition     = contains(["kubelet", "own"], var.identity)
    error_message = "identity must be \"kubelet\" or \"own\"."
  }
}

variable "kubeconfig" {
  type        = string
  default     = null
  description = "identity = own: kubeconfig for the cluster; null: KUBECONFIG or the in-cluster config."
}

variable "api_server" {
  type        = string
  default     = null
  description = "identity = own: API server URL the node reaches (the bootstrap kubeconfig's, extract-ignition's api_server output); its CA is C:\\k\\bootstrap-ca.crt."
}

variable "identity_namespace" {
  type        = string
  default     = "kube-system"
  description = "identity = own: namespace of the node's ServiceAccount. Whoever may create its tokens may create any of that namespace's (deploy/rbac/kubeadm-kube-proxy.yaml)."
}

variable "token_ttl" {
  type        = number
  default     = 604800
  description = "identity = own: lifetime in seconds asked for kube-proxy's token (the API server may cap it)."
}

variable "token_renew_after" {
  type        = number
  default     = 0.5
  description = "identity = own: fraction of the token's lifetime after which a run renews it."
}

play "kube-proxy" {
  hosts = "windows"

  # kube-proxy's own identity (kubeadm): ServiceAccount wsu-kube-proxy-<node>,
  # ClusterRoleBinding wsu:kube-proxy:<node> to system:node-proxier and no
  # more, a Node-bound token in C:\k\kube-proxy\token that client-go re-reads
  # (renewal needs no restart).
  task "kube-proxy identity" {
    when = var.identity == "own"
    k8s_node_identity {
      kubeconfig   = var.kubeconfig
      node_name    = var.node_name
      namespace    = var.identity_namespace
      name         = "kube-proxy"
      cluster_role = "system:node-proxier"
      api_server   = var.api_server
      token_ttl    = var.token_ttl
      renew_after  = var.token_renew_after
    }
  }

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
        kubeconfig   = var.identity == "own" ? task["kube-proxy identity"].kubeconfig_path : "C:\\k\\kubeconfig"
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
