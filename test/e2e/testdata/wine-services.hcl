# The service-creating parts of the stock join, for TestServicesUnderWine:
# the stock step playbooks, unchanged, on the Windows agent under Wine.
#
# Left out, because the Wine prefix has no cluster or network behind it:
# extract-ignition and the CSR, Ready and annotation plays (a cluster), and
# hybrid-overlay (it waits for the node subnet annotation, and its service
# makes the HNS networks). Wine cannot set recovery actions, so
# service_recovery is false throughout.

variable "payload_dir" {
  type = string
}

variable "node_name" {
  type = string
}

variable "node_ip" {
  type = string
}

variable "node_subnet" {
  type = string
}

include "runtime" {
  source = "wsu:check-runtime.hcl"
  vars = {
    cluster_flavour  = "kubeadm"
    payload_dir      = var.payload_dir
    service_recovery = false
    # No cluster to read them from (k8s_cluster_network is skipped).
    service_cidr = "172.30.0.0/16"
    cluster_dns  = ["172.30.0.10"]
  }
}

include "payload" {
  source = "wsu:copy-payload.hcl"
  vars = {
    payload_dir = var.payload_dir
  }
}

include "kubelet" {
  source = "wsu:configure-kubelet.hcl"
  vars = {
    node_name        = var.node_name
    node_ip          = var.node_ip
    node_labels      = [] # kubeadm: no OpenShift label (join's default there)
    service_recovery = false
  }
}

include "kube-proxy" {
  source = "wsu:kube-proxy.hcl"
  vars = {
    node_name        = include.kubelet.node_name
    node_subnet      = var.node_subnet
    service_recovery = false
  }
}

include "csi-proxy" {
  source = "wsu:csi-proxy.hcl"
  vars = {
    service_recovery = false
  }
}
