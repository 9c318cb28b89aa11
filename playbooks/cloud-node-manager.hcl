# cloud-node-manager: on Azure, the cloud controller's node part runs on
# each node, as WMCO runs it: it sets the Node's cloud facts and removes the
# node.cloudprovider.kubernetes.io/uninitialized taint, which the kubelet's
# own identity may not (NodeRestriction). It gets an identity of its own
# (k8s_node_identity: a ServiceAccount per node whose RBAC writes only that
# Node, and a bound token on the node, renewed by every run once half its
# lifetime is gone). Nothing happens unless enabled (join: platform Azure).

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster; null: KUBECONFIG or the in-cluster config."
}

variable "enabled" {
  type        = bool
  description = "Install cloud-node-manager (join: the platform is Azure)."
}

variable "node_name" {
  type        = string
  description = "The node's name."
}

variable "namespace" {
  type        = string
  description = "Namespace of the node's ServiceAccount."
}

variable "api_server" {
  type        = string
  description = "API server URL the node reaches (the bootstrap kubeconfig's); its CA is C:\\k\\bootstrap-ca.crt."
}

variable "token_ttl" {
  type        = number
  default     = 604800
  description = "Lifetime in seconds asked for the service's token (the API server may cap it)."
}

variable "token_renew_after" {
  type        = number
  default     = 0.5
  description = "Fraction of the token's lifetime after which a run renews it."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the service's recovery actions (restart on failure); false leaves them as they are."
}

play "cloud-node-manager" {
  hosts = "windows"

  task "cloud-node-manager identity" {
    when = var.enabled
    k8s_node_identity {
      kubeconfig  = var.kubeconfig
      node_name   = var.node_name
      namespace   = var.namespace
      api_server  = var.api_server
      token_ttl   = var.token_ttl
      renew_after = var.token_renew_after
    }
  }

  # WMCO's command line and no dependencies; the kubeconfig is its own, not
  # WICD's (wsu has no WICD).
  task "cloud-node-manager service" {
    when = var.enabled
    win_service {
      name       = "cloud-node-manager"
      path       = "C:\\k\\azure-cloud-node-manager.exe"
      args       = ["--windows-service", "--node-name=${var.node_name}", "--wait-routes=false", "--kubeconfig=${task["cloud-node-manager identity"].kubeconfig_path}"]
      start_mode = "automatic"
      state      = "running"
      recovery   = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
    }
  }
}
