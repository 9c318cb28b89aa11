package kube

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Adopting a host WMCO configured. WMCO (the Windows Machine Config
// Operator) marks what it configures in two places: each Windows service
// it creates carries WMCOServiceMarker in its description, and the Node
// carries WMCOVersionAnnotation (the payload version it configured). A
// host that moves from WMCO to wsu keeps its Node (and the pods on it):
// join takes over an unmarked Windows Node only when WMCO's annotation is
// on it and its addresses include the address the host was reached at,
// WMCO's own association of a BYOH entry with its Node. A host naming
// another WMCO Node (a typo, a hostile entry) is refused as before.

const (
	// WMCOServiceMarker starts the description of every service WMCO
	// (its WICD) creates (WMCO's windows.ManagedTag).
	WMCOServiceMarker = "OpenShift managed"
	// WMCOVersionAnnotation holds the payload version WMCO configured the
	// Node with; on OpenShift wsu keeps its version there too.
	WMCOVersionAnnotation = "windowsmachineconfig.openshift.io/version"
	// WMCOPrefix is the prefix of WMCO's Node labels and annotations.
	WMCOPrefix = "windowsmachineconfig.openshift.io/"
)

// WMCOLeftoverAnnotations are the Node annotations WMCO writes that wsu
// neither reads nor writes: adopting the Node removes them (the version
// annotation and the byoh label wsu keeps, on OpenShift).
var WMCOLeftoverAnnotations = []string{
	WMCOPrefix + "desired-version",
	WMCOPrefix + "pub-key-hash",
	WMCOPrefix + "username",
	WMCOPrefix + "reboot-required",
}

// WMCOLeftoverLabels are WMCO's Node labels wsu does not use: upgrading
// marks the node WMCO is upgrading (wsu's rollout has its own label).
var WMCOLeftoverLabels = []string{WMCOPrefix + "upgrading"}

// WMCONode says whether n is a Node WMCO configured for the host at
// address, not yet wsu's: a Windows Node without OwnerAnnotation,
// carrying WMCOVersionAnnotation, one of whose status addresses is
// address (compared without case, as DNS names are).
func WMCONode(n *corev1.Node, address string) bool {
	if n == nil || address == "" || n.Labels[OSLabel] != "windows" {
		return false
	}
	if _, marked := n.Annotations[OwnerAnnotation]; marked {
		return false
	}
	if _, ok := n.Annotations[WMCOVersionAnnotation]; !ok {
		return false
	}
	for _, a := range n.Status.Addresses {
		if strings.EqualFold(a.Address, address) {
			return true
		}
	}
	return false
}
