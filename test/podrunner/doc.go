//go:build linux

// Package podrunner is a STAND-IN for a kubelet and a container runtime,
// for the Kubernetes test bed (test/kubetest), where no container runtime
// exists. It registers one Linux Node (Ready), watches the Pods bound to it
// (by the real kube-scheduler, or by a test), and runs their containers
// from OCI image tarballs it is handed, then reports Pod phases, container
// states, exit codes and termination messages back to the API server. That
// is enough for a Job, a Deployment or a bare Pod of wsu's own image to run
// end to end against real controllers.
//
// How a container runs: the image's layers are flattened in order with
// go-containerregistry's mutate.Extract, once per image; each container
// gets a fresh root file system of hard links to that copy; its volumes are bind-mounted at their mountPaths; the process
// is started chrooted into it with the Pod's command/args (or the image's
// entrypoint/cmd), environment and user (runAsUser/runAsGroup), on the host
// network (127.0.0.1), its stdout and stderr appended to a log file. The
// host's /dev/null, zero, random, urandom and /proc are bound in (so /proc
// shows the host's processes).
//
// Supported: init containers (in order, each to completion, before the
// containers start), several containers, restartPolicy Never, OnFailure
// and Always (restarts after a short, growing delay); env with value,
// valueFrom secretKeyRef/configMapKeyRef/fieldRef, envFrom, and $(VAR)
// expansion; volumes of kind configMap, secret, emptyDir, downwardAPI and
// projected (serviceAccountToken through the TokenRequest API bound to the
// Pod, configMap — e.g. kube-root-ca.crt —, secret, downwardAPI), with
// items, modes, subPath and readOnly; terminationMessagePath and
// FallbackToLogsOnError (4096 bytes at most, as the kubelet); graceful
// deletion (SIGTERM, then SIGKILL after the grace period, at most 30s).
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT point at the test
// API server, so in-cluster clients work.
//
// Limits, by design: no isolation beyond chroot (no namespaces, cgroups,
// seccomp or capabilities: processes run as root unless runAsUser says
// otherwise, and see the host's processes and network); no resource
// limits; no probes (a running container is Ready); image files are hard
// links to one unpacked copy per image, so a container (running as root)
// that writes into an image file in place changes it for later containers
// (replacing or deleting it does not); no image pulls (an
// image not in Options.Images leaves the Pod Pending, its container waiting
// with reason ErrImagePull); volumes are
// written once when the Pod starts (no updates of ConfigMaps, Secrets or
// tokens afterwards); no fsGroup, hostPath, persistent or CSI volumes; no
// pod networking, Services, ports or DNS; no node heartbeats or Leases (no
// node lifecycle controller runs in the test bed to miss them: the runner
// lifts the not-ready taint the API server puts on a new Node itself); no
// exec, attach, port-forward or logs API (read the files: LogPath). It must
// run as root on Linux (chroot, bind mounts, credentials).
package podrunner
