# site: how Example Corp joins its Windows hosts. The stock join runs
# unchanged (source = "wsu:join.hcl", the copy built into wsu); this file
# only adds the site's own steps around it: a check of the settings and
# site trust and time before the join, node labels after it.
# docs/site-customisation.md walks through it.
#
#   wsu validate site.hcl
#   wsu plan  site.hcl -i inventory.ini -var-file site.vars.hcl
#   wsu apply site.hcl -i inventory.ini -var-file site.vars.hcl

# Join's variables the site's own tasks use. An outside value (var file,
# inventory, -var) reaches every playbook of the run that declares the
# name, so join and its steps get the same values: nothing to pass on.
variable "service_cidr" {
  type        = string
  description = "Cluster service network. Required here: the stock default is OpenShift's."
}

variable "cluster_dns" {
  type        = list(string)
  description = "Cluster DNS service addresses; they must lie in service_cidr."
}

variable "https_proxy" {
  type        = string
  default     = null
  description = "Proxy for the node's services; null: none."
}

variable "no_proxy" {
  type        = string
  default     = null
  description = "What the node's services reach without the proxy; must name service_cidr when there is a proxy."
}

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster side; null: KUBECONFIG or in-cluster."
}

variable "node_name" {
  type        = string
  default     = null
  description = "Node name override, as for join; null: the host name, lower-cased."
}

# The site's own settings.
variable "site_ca_file" {
  type        = string
  default     = "files/site-ca.pem"
  description = "PEM file with the site CA the nodes trust (the registry mirror and the proxy present certificates it signed); relative paths are to this playbook's directory."
}

variable "ntp_servers" {
  type        = string
  default     = "time.example.com,0x8"
  description = "W32Time NtpServer list: node and API server clocks must agree for certificates and CSRs."
}

variable "site_labels" {
  type = map(string)
  default = {
    "node-role.kubernetes.io/windows" = ""
    "example.com/owner"               = "platform-team"
  }
  description = "Labels every Windows node gets once joined (node-role labels too, which a kubelet may not set on its own Node)."
}

locals {
  # join names the Node this way (configure-kubelet) but has no outputs,
  # so the site derives the name the same way.
  node = coalesce(var.node_name, lower(host.facts.hostname))
}

# Controller only: checks the settings per host before anything is
# connected or changed.
play "preflight" {
  hosts = "windows"

  task "site settings" {
    assert {
      that = concat(
        [for ip in var.cluster_dns : cidrcontains(var.service_cidr, ip)],
        [var.https_proxy == null || strcontains(var.no_proxy == null ? "" : var.no_proxy, var.service_cidr)],
      )
      fail_message    = "cluster_dns must lie in service_cidr ${var.service_cidr}, and no_proxy must name it when https_proxy is set."
      success_message = "service_cidr ${var.service_cidr}, cluster_dns ${join(",", var.cluster_dns)}, proxy ${coalesce(var.https_proxy, "none")}, zone ${try(host.vars.zone, "none")}"
    }
  }
}

# Before the join: the site CA (image pulls through the mirror and the
# proxy need it) and the time source.
play "site-trust" {
  hosts = "windows"

  task "site ca" {
    win_file {
      path    = "C:\\k\\tls\\site-ca.crt"
      content = file(var.site_ca_file)
    }
    notify = ["trust site ca"]
  }

  task "ntp servers" {
    win_registry {
      key   = "HKLM\\SYSTEM\\CurrentControlSet\\Services\\W32Time\\Parameters"
      name  = "NtpServer"
      value = var.ntp_servers
    }
    notify = ["restart w32time"]
  }

  task "ntp type" {
    win_registry {
      key   = "HKLM\\SYSTEM\\CurrentControlSet\\Services\\W32Time\\Parameters"
      name  = "Type"
      value = "NTP"
    }
    notify = ["restart w32time"]
  }

  # A handler, so certutil runs only when the file changed: a command
  # always reports a change.
  handler "trust site ca" {
    win_command {
      argv = ["certutil.exe", "-f", "-addstore", "Root", "C:\\k\\tls\\site-ca.crt"]
    }
  }

  handler "restart w32time" {
    win_service {
      name  = "W32Time"
      state = "restarted"
    }
  }
}

# The stock join, as built into wsu. It passes no vars: everything join
# needs (payload_dir, cluster_flavour, the proxy, extra_kubelet_args,
# node_ip, max_pods...) comes from the var file and the inventory by name,
# so `wsu apply upgrade` with the same var file and inventory, which runs
# the stock join without this file, configures the nodes the same way.
include "join" {
  source = "wsu:join.hcl"
}

# After the join: the Node exists and is Ready.
play "labels" {
  hosts = "windows"

  task "site labels" {
    k8s_node {
      kubeconfig = var.kubeconfig
      name       = local.node
      # Only the labels the inventory gives: a null value would remove one.
      labels = merge(var.site_labels, { for k, v in {
        "topology.kubernetes.io/zone" = try(host.vars.zone, null)
        "example.com/rack"            = try(host.vars.rack, null)
      } : k => v if v != null })
    }
  }
}
