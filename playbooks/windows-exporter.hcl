# windows-exporter: run windows_exporter as a service with WMCO's
# collectors and port, and publish it to the cluster as WMCO does (the
# windows-exporter Service, without selector, and an EndpointSlice of the
# node's address) so Prometheus can scrape every Windows node through it.
# With tls_cert and tls_key it serves HTTPS only, as WMCO runs it: the
# certificate and key go to C:\k\tls (the key readable by SYSTEM and
# Administrators only) and a web config naming them to WMCO's path, passed
# as --web.config.file (the exporter reads the files at each handshake, so
# a renewed certificate needs no restart). On OpenShift, serving_cert_secret
# takes the certificate from the service CA instead, as WMCO does: the
# Service asks for it (service.beta.openshift.io/serving-cert-secret-name),
# the service-ca operator writes it into that Secret, and the endpoint task,
# which runs first for that reason, returns it.
# A windows_exporter service someone else installed is left as it is,
# unless take_over (WMCO's, on a host join adopts).

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster; null: KUBECONFIG or the in-cluster config."
}

variable "node_name" {
  type        = string
  description = "The node's name."
}

variable "node_ip" {
  type        = string
  description = "The node's address, published as the exporter's endpoint."
}

variable "namespace" {
  type        = string
  description = "Namespace of the windows-exporter Service and the nodes' EndpointSlices."
}

variable "port" {
  type        = number
  default     = 9182
  description = "Port windows_exporter listens on (WMCO's, the exporter's default)."
}

variable "collectors" {
  type        = list(string)
  default     = ["cpu", "logical_disk", "net", "os", "service", "system", "container", "memory", "cpu_info"]
  description = "windows_exporter --collectors.enabled (WMCO's list)."
}

variable "publish" {
  type        = bool
  default     = true
  description = "Publish the node's endpoint in the windows-exporter Service (needs cluster rights: false in a node-only join)."
}

variable "take_over" {
  type        = bool
  default     = false
  description = "Take over a windows_exporter service someone else installed (WMCO's, on a host join adopts from WMCO) instead of leaving it as it is."
}

variable "tls_cert" {
  type        = string
  default     = null
  description = "PEM serving certificate (chain) windows_exporter presents: set with tls_key, it serves HTTPS only (--web.config.file); null: plain HTTP. Its names must include the ServiceMonitor's serverName (deploy/components/prometheus: windows-exporter.<metrics namespace>.svc)."
}

variable "tls_key" {
  type        = string
  default     = null
  sensitive   = true
  description = "PEM private key of tls_cert (from a Secret: spec.varsFrom); written readable by SYSTEM and Administrators only, never shown in a plan."
}

variable "serving_cert_secret" {
  type        = string
  default     = null
  description = "OpenShift: Secret the service CA writes the windows-exporter Service's serving certificate into (the Service is annotated to ask for it), used when tls_cert is null; null: none. Needs publish."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the service's recovery actions (restart on failure); false leaves them as they are."
}

locals {
  service_ca = var.tls_cert == null && var.serving_cert_secret != null
  tls        = var.tls_cert != null || local.service_ca
  tls_cert   = "C:\\k\\tls\\windows-exporter.crt"
  tls_key    = "C:\\k\\tls\\windows-exporter.key"
  web_config = "C:\\k\\tls\\windows-exporter-webconfig.yaml"
}

play "windows-exporter" {
  hosts = "windows"

  task "exporter tls inputs" {
    assert {
      that         = [(var.tls_cert == null) == (var.tls_key == null), !local.service_ca || var.publish]
      fail_message = "tls_cert and tls_key are set together or not at all; serving_cert_secret needs publish (the Service asks the service CA for the certificate)."
    }
  }

  # Before the exporter's TLS files: with serving_cert_secret, it returns
  # the certificate the service CA wrote for the Service.
  task "metrics endpoint" {
    when = var.publish
    k8s_metrics_endpoint {
      kubeconfig          = var.kubeconfig
      namespace           = var.namespace
      node_name           = var.node_name
      address             = var.node_ip
      port                = var.port
      serving_cert_secret = var.serving_cert_secret
    }
  }

  task "exporter tls directory" {
    when = local.tls
    win_directory {
      path = "C:\\k\\tls"
    }
  }

  task "exporter certificate" {
    when = local.tls
    win_file {
      path    = local.tls_cert
      content = local.service_ca ? task["metrics endpoint"].tls_cert : var.tls_cert
    }
  }

  task "exporter key" {
    when = local.tls
    win_file {
      path    = local.tls_key
      content = local.service_ca ? task["metrics endpoint"].tls_key : var.tls_key
      acl     = "administrators"
    }
  }

  # The exporter toolkit's web config (Prometheus' --web.config.file).
  task "exporter web config" {
    when = local.tls
    win_file {
      path    = local.web_config
      content = "tls_server_config:\n  cert_file: ${jsonencode(local.tls_cert)}\n  key_file: ${jsonencode(local.tls_key)}\n"
    }
  }

  task "exporter log directory" {
    win_directory {
      path = "C:\\var\\log\\windows_exporter"
    }
  }

  task "exporter service" {
    win_service {
      name = "windows_exporter"
      path = "C:\\k\\windows_exporter.exe"
      args = concat([
        "--collectors.enabled", join(",", var.collectors),
        "--web.listen-address", ":${var.port}",
        "--log.level", "info",
        "--log.file", "C:\\var\\log\\windows_exporter\\windows_exporter.log",
      ], local.tls ? ["--web.config.file", local.web_config] : [])
      start_mode      = "automatic"
      state           = "running"
      recovery        = var.service_recovery ? { restart_delays = [10, 30, 60], reset_period = 86400 } : null
      only_if_managed = !var.take_over
    }
  }
}
