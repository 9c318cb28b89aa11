# check-runtime: the cluster can take Windows workers, and the container
# runtime exists and runs on the node before anything else is configured.

variable "cluster_flavour" {
  type        = string
  default     = "openshift"
  description = "openshift (OVN-Kubernetes with hybrid overlay, Machine Config Server) or kubeadm."
  validation {
    condition     = contains(["openshift", "kubeadm"], var.cluster_flavour)
    error_message = "cluster_flavour must be \"openshift\" or \"kubeadm\"."
  }
}

variable "cni_bin_dir" {
  type        = string
  default     = "C:\\k\\cni"
  description = "containerd's CNI bin_dir."
}

variable "cni_conf_dir" {
  type        = string
  default     = "C:\\k\\cni\\config"
  description = "containerd's CNI conf_dir."
}

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster modules; null: KUBECONFIG or the in-cluster config."
}

variable "manage_containerd" {
  type        = bool
  default     = true
  description = "Install containerd from the payload and run it as service containerd (current WMCO); false: require an existing containerd service."
}

variable "payload_dir" {
  type        = string
  description = "Directory on the machine running wsu holding the payload and its manifest.json."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the services' recovery actions (restart on failure). Wine cannot, so its tests turn this off."
}

variable "pause_image" {
  type        = string
  default     = "mcr.microsoft.com/oss/kubernetes/pause:3.9"
  description = "Sandbox (pause) image containerd uses."
}

variable "registry_mirrors" {
  type        = map(list(string))
  default     = null
  description = "Registry mirrors for containerd: source (a registry or repository) → mirrors, tried in order, which may resolve tags. A mirror must end with the source's path ($mirror/[org/]oss/kubernetes/pause for mcr.microsoft.com/oss/kubernetes/pause). null: on OpenShift the cluster's ImageDigestMirrorSets and ImageTagMirrorSets, elsewhere none. {} removes the mirrors wsu wrote."
}

variable "registry_auths" {
  type        = map(string)
  default     = null
  sensitive   = true
  description = "Credentials of the mirror registries, by registry host (host[:port]): each the base64 of user:password, as a pull secret's .dockerconfigjson \"auths\" holds them. A mirror on a host listed gets an Authorization header in its hosts.toml (never shown in a plan, readable by SYSTEM and Administrators only). On OpenShift the cluster's pull secret (openshift-config/pull-secret) gives the mirror hosts' credentials; a host listed here wins over it. null: the pull secret's only."
}

variable "trusted_ca_bundle" {
  type        = string
  default     = null
  description = "PEM CA bundle the node trusts (LocalMachine Root store), for registries and proxies signed by a private CA. null: on OpenShift the bundle the cluster proxy's trustedCA names, elsewhere none. \"\" removes the certificates wsu added."
}

variable "image_pull_progress_timeout" {
  type        = string
  default     = "30m0s"
  description = "containerd cancels an image pull that makes no progress for this long (WMCO's value; Windows images are large)."
}

variable "defender_excluded_processes" {
  type        = list(string)
  default     = ["C:\\k\\containerd\\containerd.exe"]
  description = "Processes Windows Defender does not scan, where Defender is installed (service WinDefend): containerd's, as WMCO excludes it. [] adds none."
}

variable "defender_excluded_paths" {
  type        = list(string)
  default     = ["C:\\ProgramData\\containerd"]
  description = "Directories Windows Defender does not scan, where Defender is installed: containerd's root and state (image layers, container scratch). [] adds none."
}

variable "service_cidr" {
  type        = string
  default     = null
  description = "The cluster's service network; null: read from the cluster."
}

variable "cluster_dns" {
  type        = list(string)
  default     = null
  description = "The cluster DNS address(es); null: read from the cluster."
}

locals {
  manifest = jsondecode(file("${var.payload_dir}/manifest.json"))
  runtime  = { for c in local.manifest.components : c.name => c if try(c.runtime, false) }
}

play "check-runtime" {
  hosts = "windows"

  task "cluster network" {
    when = var.cluster_flavour == "openshift"
    k8s_cluster_check {
      kubeconfig = var.kubeconfig
    }
  }

  # Read unless the variables say it: a cluster that cannot be read fails
  # here, before the host is changed.
  task "service network" {
    when = var.service_cidr == null || var.cluster_dns == null
    k8s_cluster_network {
      kubeconfig = var.kubeconfig
    }
  }

  task "windows host" {
    assert {
      that         = [host.facts.os == "windows"]
      fail_message = "this host does not report itself as Windows"
    }
  }

  # Disconnected and proxied clusters: where images are mirrored and which
  # CAs sign the mirrors and the proxy. Read from the cluster unless given.
  task "image mirrors" {
    when = var.cluster_flavour == "openshift" && var.registry_mirrors == null && var.manage_containerd
    k8s_image_mirrors {
      kubeconfig = var.kubeconfig
    }
  }

  task "trusted ca bundle" {
    when = var.cluster_flavour == "openshift" && var.trusted_ca_bundle == null
    k8s_trusted_ca {
      kubeconfig = var.kubeconfig
    }
  }

  task "trusted ca" {
    win_certificate {
      bundle = var.trusted_ca_bundle != null ? var.trusted_ca_bundle : try(task["trusted ca bundle"].bundle, "")
    }
  }

  task "containerd directories" {
    for_each = toset(var.manage_containerd ? ["C:\\k", "C:\\k\\containerd", "C:\\k\\containerd\\registries", "C:\\var\\log\\containerd"] : [])
    win_directory {
      path = each.key
    }
  }

  task "containerd binaries" {
    for_each = { for name, c in local.runtime : name => c if var.manage_containerd }
    win_copy {
      src     = "${var.payload_dir}/${each.value.file}"
      dest    = each.value.destination
      service = try(each.value.service, null)
      sha256  = try(each.value.sha256, null)
    }
  }

  task "containerd config" {
    when = var.manage_containerd
    win_file {
      path = "C:\\k\\containerd\\containerd_conf.toml"
      content = templatefile("templates/containerd_conf.toml.tftpl", {
        pause_image                 = var.pause_image
        image_pull_progress_timeout = var.image_pull_progress_timeout
        cni_bin_dir                 = var.cni_bin_dir
        cni_conf_dir                = var.cni_conf_dir
      })
    }
    notify = ["restart containerd"]
  }

  # One hosts.toml per mirrored registry; mirror sets read from the cluster
  # may hold entries only Linux nodes can use, which are left out with a
  # warning. containerd restarts only when a file changed.
  task "registry mirrors" {
    when = var.manage_containerd
    win_containerd_mirrors {
      mirrors = var.registry_mirrors != null ? [
        for source, mirrors in var.registry_mirrors : { source = source, mirrors = mirrors, resolve_tags = true, never_contact_source = false }
      ] : try(task["image mirrors"].mirrors, [])
      skip_invalid = var.registry_mirrors == null
      # The pull secret's credentials of the cluster's mirror hosts
      # (k8s_image_mirrors), registry_auths' per host over them.
      auths = merge(try(task["image mirrors"].auths, {}), var.registry_auths != null ? var.registry_auths : {})
    }
    notify = ["restart containerd"]
  }

  # Defender scanning every layer file containerd unpacks slows pulls and
  # container starts a lot. WMCO adds a process exclusion before containerd
  # starts where Defender runs (Add-MpPreference, PowerShell). wsu writes
  # the exclusions as local policy, the registry values Group Policy's
  # "Process Exclusions" and "Path Exclusions" write, and only where the
  # WinDefend service exists (see docs/windows-node.md).
  task "defender" {
    when = var.manage_containerd
    win_service_info {
      name = "WinDefend"
    }
  }

  task "defender exclusion policies" {
    for_each = { for k, v in { Exclusions_Processes = var.defender_excluded_processes, Exclusions_Paths = var.defender_excluded_paths } : k => v if length(v) > 0 && try(task.defender.exists, false) }
    win_registry {
      key   = "HKLM\\SOFTWARE\\Policies\\Microsoft\\Windows Defender\\Exclusions"
      name  = each.key
      type  = "REG_DWORD"
      value = 1
    }
  }

  task "defender excluded processes" {
    for_each = toset(try(task.defender.exists, false) ? var.defender_excluded_processes : [])
    win_registry {
      key   = "HKLM\\SOFTWARE\\Policies\\Microsoft\\Windows Defender\\Exclusions\\Processes"
      name  = each.key
      value = "0"
    }
  }

  task "defender excluded paths" {
    for_each = toset(try(task.defender.exists, false) ? var.defender_excluded_paths : [])
    win_registry {
      key   = "HKLM\\SOFTWARE\\Policies\\Microsoft\\Windows Defender\\Exclusions\\Paths"
      name  = each.key
      value = "0"
    }
  }

  task "containerd service" {
    when = var.manage_containerd
    win_service {
      name       = "containerd"
      path       = "C:\\k\\containerd\\containerd.exe"
      args       = ["--config", "C:\\k\\containerd\\containerd_conf.toml", "--log-file", "C:\\var\\log\\containerd\\containerd.log", "--run-service", "--log-level", "info"]
      start_mode = "automatic"
      state      = "running"
      recovery   = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
    }
  }

  task "containerd running" {
    win_wait {
      service = "containerd"
      state   = "running"
      timeout = 120
    }
  }

  handler "restart containerd" {
    win_service {
      name  = "containerd"
      state = "restarted"
    }
  }
}

output "hybrid_overlay_vxlan_port" {
  description = "The cluster's hybridOverlayVXLANPort (OpenShift network operator config), or null when it sets none or the cluster is not OpenShift."
  value       = try(task["cluster network"].hybrid_overlay_vxlan_port, null)
}

output "platform" {
  description = "The cluster's infrastructure platform (OpenShift Infrastructure), or null when it publishes none or the cluster is not OpenShift."
  value       = try(task["cluster network"].platform, null)
}

output "service_cidr" {
  description = "The service network: var.service_cidr, else the cluster's first."
  value       = var.service_cidr != null ? var.service_cidr : try(task["service network"].service_cidrs[0], null)
}

output "cluster_dns" {
  description = "The cluster DNS address(es): var.cluster_dns, else the cluster's."
  value       = var.cluster_dns != null ? var.cluster_dns : try(task["service network"].cluster_dns, null)
}
