package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Which Nodes wsu acts on. A node name comes from a variable, a host name
// or instance metadata: a typo, a hostile entry or a compromised host can
// name any Node, a control-plane one included. wsu acts only on a Windows
// Node it joined: labelled kubernetes.io/os=windows (the kubelet sets it)
// and annotated OwnerAnnotation by join, whose value says who joined it
// (join's node_owner: "wsu" from the CLI, the WindowsInstance from the
// controller); where the UID recorded at join is known, that UID too.

const (
	// OwnerAnnotation marks a Node wsu joined; its value says who joined it.
	OwnerAnnotation = "wsu.dev/owner"
	// OSLabel is the kubelet's operating-system label.
	OSLabel = "kubernetes.io/os"
)

// InstanceOwner is the OwnerAnnotation value of a WindowsInstance's Node.
func InstanceOwner(namespace, name string) string {
	return "windowsinstance/" + namespace + "/" + name
}

// NodeRefusal says why n is not a Windows Node of owner (any owner when
// "") with uid (any when ""), or "" when it is. unmarkedOK accepts a
// Windows Node without the mark (adoption).
func NodeRefusal(n *corev1.Node, owner, uid string, unmarkedOK bool) string {
	if os := n.Labels[OSLabel]; os != "windows" {
		if os == "" {
			os = "unset"
		}
		return fmt.Sprintf("Node %s is not a Windows Node (label %s is %s): wsu acts only on Windows Nodes it joined. Check the node name (node_name, or the host's name).", n.Name, OSLabel, os)
	}
	if uid != "" && string(n.UID) != uid {
		return fmt.Sprintf("Node %s has UID %s, not %s, the Node wsu joined under that name: it is another Node, registered since.", n.Name, n.UID, uid)
	}
	have, marked := n.Annotations[OwnerAnnotation]
	switch {
	case !marked && unmarkedOK:
		return ""
	case !marked:
		return fmt.Sprintf("Node %s has no %s annotation: wsu did not join it (another tool's, or a join cut short before it marked the Node). If it is this host's, join it again with adopt_node = true.", n.Name, OwnerAnnotation)
	case owner != "" && have != owner:
		return fmt.Sprintf("Node %s belongs to %s=%q, not %q: another host or instance joined it under this name. Check the node name (node_name, or the host's name).", n.Name, OwnerAnnotation, have, owner)
	}
	return ""
}
