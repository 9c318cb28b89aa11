# Example Corp's cluster: kubeadm-built, running OVN-Kubernetes with the
# hybrid overlay, on kubeadm's default service network. Give it with
# -var-file site.vars.hcl; inventory group and host variables win over it.
# Only join's variables live here, so `wsu apply upgrade` takes this file
# as it is.

payload_dir     = "/srv/wsu/payload-1.31"
cluster_flavour = "kubeadm"
kubeconfig      = "/etc/wsu/admin.kubeconfig"

service_cidr = "10.96.0.0/12"
cluster_dns  = ["10.96.0.10"]

# Kubelet flags the stock configuration does not set.
extra_kubelet_args = ["--image-gc-high-threshold=80", "--image-gc-low-threshold=60"]

http_proxy  = "http://proxy.example.com:3128"
https_proxy = "http://proxy.example.com:3128"
no_proxy    = ".cluster.local,.svc,10.96.0.0/12,10.244.0.0/16,10.0.0.0/8"
