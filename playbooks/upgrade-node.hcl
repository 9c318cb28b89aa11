# upgrade-node: one node's upgrade, run by upgrade.hcl batch by batch. A
# node whose version annotation already matches the payload is not
# cordoned or drained (a re-run of an upgrade touches nothing).
# Variables (payload_dir, kubeconfig, ...) are join's: set them as for join.
# Only a Windows Node wsu joined (annotation wsu.dev/owner = node_owner,
# and the UID node_uid when given) is cordoned or drained: any other Node
# of that name fails the run at its first cluster task, before anything
# changes.

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

variable "node_owner" {
  type        = string
  default     = "wsu"
  description = "join's node_owner: the wsu.dev/owner annotation the Node must carry."
}

variable "node_uid" {
  type        = string
  default     = null
  description = "UID the Node must have (the controller passes the one it recorded at join); null: any."
}

variable "adopt_node" {
  type        = bool
  default     = false
  description = "join's adopt_node: take over a Windows Node without the wsu.dev/owner annotation (one an earlier wsu joined) and mark it before it is cordoned."
}

variable "platform" {
  type        = string
  default     = null
  description = "The platform given at join (join's), for the name of the Node to cordon and drain: VSphere nodes are named by their FQDN, AWS and GCP nodes by the host name their instance metadata service gives (this step does not read the cluster: set it, or node_name)."
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

variable "payload_dir" {
  type        = string
  description = "Directory on the machine running wsu with the new payload and its manifest.json (join's)."
}

variable "version_annotation" {
  type        = string
  default     = null
  description = "Node annotation holding the payload version the node was configured with (join's): a node already at the payload's version is not cordoned or drained. null: as join, by cluster_flavour (windowsmachineconfig.openshift.io/version on OpenShift, wsu.dev/version elsewhere)."
}

variable "cluster_flavour" {
  type        = string
  default     = "openshift"
  description = "openshift or kubeadm (join's): which version annotation join wrote, when version_annotation is null."
}

variable "network" {
  type        = string
  default     = null
  description = "join's network; null: the one join recorded on the Node (annotation wsu.dev/network; ovn-hybrid for a node an earlier wsu joined, which has only the version annotation), so an upgrade keeps the node's network, else join's default."
}

locals {
  # The network join recorded on the Node. A node an earlier wsu joined
  # has WMCO's version annotation but no network one: that wsu knew only
  # ovn-hybrid, which the upgrade keeps.
  joined_network = try(task["current version"].annotations["wsu.dev/network"], (
    try(task["current version"].annotations["windowsmachineconfig.openshift.io/version"], null) != null ? "ovn-hybrid" : null
  ))
  version_annotation = var.version_annotation != null ? var.version_annotation : (var.cluster_flavour == "openshift" ? "windowsmachineconfig.openshift.io/version" : "wsu.dev/version")
  node = var.node_name != null ? var.node_name : (
    var.platform == "VSphere" ? lower(host.facts.fqdn) : coalesce(try(task["instance metadata name"].node_name, null), lower(host.facts.hostname))
  )
  version = jsondecode(file("${var.payload_dir}/manifest.json")).version
  # Only a node whose version annotation differs from the payload's is
  # taken out of service; join below still converges every node.
  outdated = try(task["current version"].annotations[local.version_annotation], null) != local.version
}

play "cordon" {
  hosts = "windows"

  # The name join registered on AWS and GCP, read on the node as join does.
  task "instance metadata name" {
    when = var.node_name == null && contains(["AWS", "GCP"], coalesce(var.platform, "None"))
    win_instance_metadata {
      platform = var.platform
      endpoint = var.instance_metadata_url
    }
  }

  task "node owner" {
    k8s_node_owner {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
      adopt      = var.adopt_node
    }
  }

  task "current version" {
    k8s_node {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
    }
  }

  task "cordon" {
    when = local.outdated
    k8s_node_cordon {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
    }
  }

  task "drain" {
    when = local.outdated
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

# join converges the node to the new payload and configuration; steps that
# are already right change nothing.
include "join" {
  source = "./join.hcl"
  vars = {
    network = var.network != null ? var.network : local.joined_network
  }
}

play "uncordon" {
  hosts = "windows"

  task "uncordon" {
    when = local.outdated
    k8s_node_cordon {
      kubeconfig = var.kubeconfig
      name       = local.node
      owner      = var.node_owner
      uid        = var.node_uid
      cordoned   = false
    }
  }
}
