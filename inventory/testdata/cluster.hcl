# Kubernetes cluster: a Linux control plane and Windows worker nodes.
# Equivalent to cluster.ini and cluster.yml; fixtures_test.go checks that they agree.

group "all" {
  vars = {
    ntp_server   = "pool.ntp.org"
    ansible_user = "root"
  }
}

group "k8s_cluster" {
  children = ["linux", "windows"]
  vars = {
    k8s_version = "1.30.2"
    cni         = "flannel"
  }
}

group "linux" {
  children = ["control_plane"]
}

group "control_plane" {
  host "cp01" {
    ansible_host = "10.0.0.10"
    ansible_user = "ubuntu"
  }
}

group "windows" {
  hosts = ["win[01:03]"]

  host "win04" {
    ansible_host    = "10.0.1.4"
    k8s_node_labels = "role=gpu,zone=b"
    gpu_driver      = "535.104"
  }

  vars = {
    ansible_user                         = "Administrator"
    ansible_connection                   = "winrm"
    ansible_winrm_transport              = "ntlm"
    ansible_port                         = 5986
    ansible_winrm_server_cert_validation = "ignore"
    kubelet_root                         = "C:\\var\\lib\\kubelet"
  }
}

// GPU nodes get their driver pinned per host (in win04's block above).
group "gpu" {
  hosts = ["win04"]
}
