#!/usr/bin/env bash
# The README's first command (make demo): join a simulated Windows host to a
# real kube-apiserver over a real OpenSSH sshd, all on 127.0.0.1: plan,
# apply join, plan again (no changes). test/demo does the work and cleans
# up after itself; --keep leaves everything running until Ctrl-C.
#
# --controller shows the cluster face instead (make demo-controller): wsu
# installed from deploy/rendered/kubernetes.yaml with a real kubectl, the
# controller run as a process with its ServiceAccount's token (the bed has
# no kubelet for its pod), a BYOH ConfigMap entry planned, approved with
# wsu approve, joined and Ready, then removed and the host deconfigured.
#
# A fresh machine needs: Go (see go.mod), and openssh-server, which the demo
# installs with apt-get when it runs as root. The first run builds
# kube-apiserver and etcd from the Go module proxy (several minutes; cached
# in ~/.cache/wsu/kube; --controller also kubectl, which make kubetest
# builds ahead).
set -euo pipefail
cd "$(dirname "$0")/.."
WSU=${WSU:-bin/wsu}
if [ "$(uname -s)" != Linux ]; then
  echo "demo: the simulated Windows host and the test cluster run on Linux only" >&2
  exit 1
fi
if ! command -v ssh-keygen >/dev/null 2>&1 && [ "$(id -u)" -ne 0 ]; then
  echo "demo: ssh-keygen is missing; install it with: sudo apt-get install -y openssh-client openssh-server" >&2
  exit 1
fi
go build -o bin/wsu-demo ./test/demo
exec bin/wsu-demo --wsu "$WSU" "$@"
