// Package rbac holds, for Go code, the RBAC manifests of this directory that
// are installed as they are (the rest is kustomized by deploy/overlays).
package rbac

import _ "embed"

// KubeadmBootstrappers is kubeadm-bootstrappers/kubeadm-bootstrappers.yaml:
// what wsu's bootstrap token group may do on a kubeadm cluster (create and
// watch CSRs, get Nodes; not their auto-approval). The test bed installs it
// as the kubernetes overlay does.
//
//go:embed kubeadm-bootstrappers/kubeadm-bootstrappers.yaml
var KubeadmBootstrappers []byte
