package kube

// Where OpenShift keeps the cluster's pull secret: every node's registry
// credentials (the machine-config operator writes it to each Linux node).
// k8s_image_mirrors reads the mirror hosts' entries from it; the controller
// watches it to push a change at once.
const (
	PullSecretNamespace = "openshift-config"
	PullSecretName      = "pull-secret"
)
