# copy-payload: the node's directories and every payload file except the
# container runtime's (check-runtime installs those). A file whose sha256
# already matches is not sent; replacing the binary of a running service
# stops it first and starts it again.

variable "payload_dir" {
  type        = string
  description = "Directory on the machine running wsu holding the payload and its manifest.json."
}

locals {
  manifest   = jsondecode(file("${var.payload_dir}/manifest.json"))
  components = { for c in local.manifest.components : c.name => c if !try(c.runtime, false) }
  directories = [
    "C:\\k", "C:\\k\\cni", "C:\\k\\cni\\config", "C:\\k\\etc\\kubernetes\\manifests", "C:\\k\\tls",
    "C:\\var\\log\\kubelet", "C:\\var\\log\\kube-proxy", "C:\\var\\log\\hybrid-overlay",
    "C:\\var\\log\\csi-proxy", "C:\\var\\lib\\kubelet\\pki", "C:\\Temp",
  ]
}

play "copy-payload" {
  hosts = "windows"

  task "directories" {
    for_each = toset(local.directories)
    win_directory {
      path = each.key
    }
  }

  task "payload" {
    for_each = local.components
    # One file at a time: four at once (parallelism = 4) was slower on the
    # development machine, 15-19 s against 8-15 s for the realistic payload
    # (docs/performance.md, "Overlapping the one-host copy").
    win_copy {
      src     = "${var.payload_dir}/${each.value.file}"
      dest    = each.value.destination
      service = try(each.value.service, null)
      # The manifest's sum: a re-run reads no payload file on the controller.
      sha256 = try(each.value.sha256, null)
    }
  }

  task "path" {
    win_path {
      entry = "C:\\k"
    }
  }
}

output "version" {
  value = local.manifest.version
}
