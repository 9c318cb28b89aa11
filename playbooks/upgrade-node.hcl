# upgrade-node: one node's upgrade, run by upgrade.hcl batch by batch.
# Variables (payload_dir, kubeconfig, ...) are join's: set them as for join.

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster modules (cordon, drain, and join's); null: KUBECONFIG or the in-cluster config."
}

variable "node_name" {
  type        = string
  default     = null
  description = "Node name override used at join; default: the host name, lower-cased."
}

variable "drain_timeout" {
  type        = number
  default     = 600
  description = "Seconds the drain may take (evictions honour PodDisruptionBudgets)."
}

locals {
  node = coalesce(var.node_name, lower(host.facts.hostname))
}

play "cordon" {
  hosts = "windows"

  task "cordon" {
    k8s_node_cordon {
      kubeconfig = var.kubeconfig
      name       = local.node
    }
  }

  task "drain" {
    k8s_node_drain {
      kubeconfig = var.kubeconfig
      name       = local.node
      timeout    = var.drain_timeout
    }
  }
}

# join converges the node to the new payload and configuration; steps that
# are already right change nothing.
include "join" {
  source = "./join.hcl"
}

play "uncordon" {
  hosts = "windows"

  task "uncordon" {
    k8s_node_cordon {
      kubeconfig = var.kubeconfig
      name       = local.node
      cordoned   = false
    }
  }
}
