// Package downward resolves the downward API's pod fields (fieldRef), for
// the test stand-ins that run pods: the pod runner (a kubelet and runtime
// for Linux pods) and the kubelet stand-in's HostProcess pods. One
// resolver, so both give a pod the same values.
package downward

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// FieldValue is the value of the pod field path names, as a kubelet gives
// it: hostIP is the node's address, which a pod on the host network (all
// a stand-in runs) also has as its own.
func FieldValue(pod *corev1.Pod, path, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP":
		return hostIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("field %q is not supported by the test stand-ins", path)
}
