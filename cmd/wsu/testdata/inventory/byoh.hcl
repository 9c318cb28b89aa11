# Shows what a BYOH windows-instances inventory gives each host, and reads
# the cluster through --kubeconfig (k8s_node_wait only plans: no host is
# contacted). inventory_test.go runs it against a real kube-apiserver.
play "byoh" {
  hosts = "windows"

  task "vars" {
    print {
      msg = "host=${host.vars.ansible_host} user=${host.vars.ansible_user} connection=${host.vars.connection} groups=${join(",", host.groups)}"
    }
  }

  task "key" {
    print {
      msg = "key=${try(host.vars.ssh_private_key, "none")}"
    }
  }

  task "node" {
    k8s_node_wait {
      name    = "byoh-node"
      timeout = 1
    }
  }
}
