# extract-ignition: what the kubelet needs to join — a bootstrap kubeconfig
# and the kubelet CA (plus the cloud provider settings on OpenShift). On
# OpenShift they come from the newest rendered-worker MachineConfig (or the
# Machine Config Server); on kubeadm clusters from a bootstrap token minted
# for this join and the kube-public/cluster-info CA. The bootstrap
# kubeconfig is a credential: readable by SYSTEM and Administrators only,
# and written only while the kubelet has no client certificate of its own
# (C:\k\kubeconfig); join removes it once the kubelet has one, so a
# re-run mints no token and writes nothing.

variable "cluster_flavour" {
  type        = string
  default     = "openshift"
  description = "openshift (bootstrap kubeconfig and kubelet CA from the worker ignition) or kubeadm (from a bootstrap token and kube-public/cluster-info)."
}

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster modules; null: KUBECONFIG or the in-cluster config."
}

variable "ignition_source" {
  type        = string
  default     = "machineconfig"
  description = "OpenShift: machineconfig (current WMCO) or mcs (the Machine Config Server)."
}

variable "api_server" {
  type        = string
  default     = null
  description = "API server URL written into the bootstrap kubeconfig (default: the cluster's own, from kubeconfig)."
}

variable "mcs_url" {
  type        = string
  default     = null
  description = "Machine Config Server URL, https://api-int.<cluster>:22623/config/worker (ignition_source = mcs)."
}

variable "mcs_ca" {
  type        = string
  default     = null
  description = "PEM CA the Machine Config Server's certificate must chain to (ignition_source = mcs)."
}

variable "bootstrap_token_ttl" {
  type        = string
  default     = "30m"
  description = "kubeadm: lifetime of the bootstrap token minted for this join: long enough for the kubelet to get its client certificate (join waits csr_timeout for it), then kube-controller-manager's tokencleaner deletes it."
}

variable "bootstrap_token_group" {
  type        = string
  default     = "system:bootstrappers:wsu"
  description = "kubeadm: the bootstrap token's group. wsu's own (deploy/rbac/kubeadm-bootstrappers: CSRs, no auto-approval, so k8s_csr_approve is the gate), or kubeadm's system:bootstrappers:kubeadm:default-node-token, whose client CSRs kube-controller-manager approves itself."
}

variable "bootstrap_kubeconfig" {
  type        = string
  default     = null
  sensitive   = true
  description = "kubeadm: a bootstrap kubeconfig made elsewhere (a node-only join's, from k8s_discovery) instead of a token minted here; cluster_ca, cluster_api_server and bootstrap_requester go with it."
}

variable "cluster_ca" {
  type        = string
  default     = null
  description = "With bootstrap_kubeconfig: the cluster CA (PEM) it verifies the API server with."
}

variable "cluster_api_server" {
  type        = string
  default     = null
  description = "With bootstrap_kubeconfig: the API server URL it names."
}

variable "bootstrap_requester" {
  type        = string
  default     = null
  description = "With bootstrap_kubeconfig: the identity its token authenticates as (system:bootstrap:<id>)."
}

locals {
  # A bootstrap kubeconfig given (node-only join) replaces the token minted
  # here; each value below comes from one or the other.
  minted     = var.cluster_flavour == "kubeadm" && var.bootstrap_kubeconfig == null
  kubeadm_ca = var.bootstrap_kubeconfig != null ? var.cluster_ca : try(task.bootstrap_token.ca, null)
}

play "extract-ignition" {
  hosts = "windows"

  # The kubelet writes its own kubeconfig once its client certificate is
  # issued; from then on it needs no bootstrap credential.
  task "kubelet kubeconfig" {
    win_stat {
      path = "C:\\k\\kubeconfig"
    }
  }

  task "ignition" {
    when = var.cluster_flavour == "openshift"
    k8s_ignition {
      kubeconfig = var.kubeconfig
      source     = var.ignition_source
      url        = var.mcs_url
      ca         = var.mcs_ca
      api_server = var.api_server
    }
  }

  task "bootstrap_token" {
    when = local.minted
    k8s_bootstrap_token {
      kubeconfig  = var.kubeconfig
      mint        = !task["kubelet kubeconfig"].exists
      ttl         = var.bootstrap_token_ttl
      description = "wsu: Windows node join"
      group       = var.bootstrap_token_group
      api_server  = var.api_server
    }
  }

  task "bootstrap kubeconfig" {
    when = !task["kubelet kubeconfig"].exists
    win_file {
      path    = "C:\\k\\bootstrap-kubeconfig"
      content = var.cluster_flavour == "openshift" ? task.ignition.bootstrap_kubeconfig : (local.minted ? task.bootstrap_token.bootstrap_kubeconfig : var.bootstrap_kubeconfig)
      acl     = "administrators"
    }
  }

  task "kubelet ca" {
    win_file {
      path    = "C:\\k\\kubelet-ca.crt"
      content = var.cluster_flavour == "openshift" ? task.ignition.kubelet_ca : local.kubeadm_ca
    }
  }

  # hybrid-overlay-node's --k8s-cacert: the CA that verifies the API
  # server, as the bootstrap kubeconfig holds it (WMCO's bootstrap-ca.crt).
  task "bootstrap ca" {
    win_file {
      path    = "C:\\k\\bootstrap-ca.crt"
      content = var.cluster_flavour == "openshift" ? task.ignition.api_ca : local.kubeadm_ca
    }
  }

  task "cloud config" {
    when = var.cluster_flavour == "openshift" && try(task.ignition.cloud_config_name, null) != null
    win_file {
      path    = "C:\\k\\${task.ignition.cloud_config_name}"
      content = task.ignition.cloud_config
    }
  }
}

# Outputs read tasks that --tags may leave out: null then, not an error.
output "cloud_provider" {
  value = var.cluster_flavour == "openshift" ? try(task.ignition.cloud_provider, null) : null
}

output "cloud_config" {
  value = var.cluster_flavour == "openshift" && try(task.ignition.cloud_config_name, null) != null ? "C:\\k\\${task.ignition.cloud_config_name}" : null
}

output "kubelet_verbosity" {
  value = var.cluster_flavour == "openshift" ? try(task.ignition.kubelet_verbosity, null) : null
}

output "api_server" {
  description = "The API server URL nodes use (the bootstrap kubeconfig's), for hybrid-overlay-node's --k8s-apiserver."
  value       = var.cluster_flavour == "openshift" ? try(task.ignition.api_server, null) : (local.minted ? try(task.bootstrap_token.api_server, null) : var.cluster_api_server)
}

output "kubelet_kubeconfig" {
  description = "Whether the kubelet had its own kubeconfig (its client certificate) before this run: then no bootstrap credential was written."
  value       = try(task["kubelet kubeconfig"].exists, null)
}

output "bootstrap_requester" {
  description = "kubeadm: the identity the kubelet's client CSR comes from (system:bootstrap:<token-id>); null when no token was minted."
  value       = var.cluster_flavour == "kubeadm" ? (local.minted ? try(task.bootstrap_token.requester, null) : var.bootstrap_requester) : null
}
