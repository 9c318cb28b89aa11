package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// kubeletDoc is a KubeletConfiguration as a generic document, so that the
// fields wsu does not know (newer kubelets', a site's) pass through as the
// cluster has them. Numbers stay json.Number: their text is kept exactly.
type kubeletDoc map[string]any

// windowsKubelet is what the merge needs besides the cluster's document.
type windowsKubelet struct {
	// serverTLSBootstrap: the kubelet asks the cluster for its serving
	// certificate (someone approves it) rather than signing its own.
	serverTLSBootstrap bool
	// clusterDNS replaces the document's clusterDNS when not nil.
	clusterDNS []string
	// defaultDNS and defaultDomain fill clusterDNS and clusterDomain when
	// the document has none (kubeadm's own defaulting, from its
	// ClusterConfiguration: the .10 service address and dnsDomain).
	defaultDNS    []string
	defaultDomain string
	// clientCAFile is the CA file the kubelet checks client certificates
	// against (wsu writes C:\k\kubelet-ca.crt).
	clientCAFile string
}

// parseKubeletDoc reads the YAML (or JSON) of a KubeletConfiguration.
func parseKubeletDoc(text string) (kubeletDoc, error) {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc kubeletDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("the document is empty")
	}
	if kind, _ := doc["kind"].(string); kind != "" && kind != "KubeletConfiguration" {
		return nil, fmt.Errorf("kind is %q, not KubeletConfiguration", kind)
	}
	return doc, nil
}

// windowsKubeletConfig is the document a Windows kubelet runs with: the
// cluster's, defaulted and mutated as kubeadm join does on Windows, with the
// fields a Windows node and wsu's join need set on top. It changes doc.
func windowsKubeletConfig(doc kubeletDoc, w windowsKubelet) kubeletDoc {
	defaultFromCluster(doc, w)
	mutateForWindows(doc, "C:")
	setRequired(doc, w)
	return doc
}

// defaultFromCluster fills what kubeadm derives from its
// ClusterConfiguration when the kubelet document lacks it, then applies an
// explicit clusterDNS.
func defaultFromCluster(doc kubeletDoc, w windowsKubelet) {
	if s, _ := doc["clusterDomain"].(string); s == "" && w.defaultDomain != "" {
		doc["clusterDomain"] = w.defaultDomain
	}
	if l, _ := doc["clusterDNS"].([]any); len(l) == 0 && len(w.defaultDNS) > 0 {
		doc["clusterDNS"] = anyList(w.defaultDNS)
	}
	if w.clusterDNS != nil {
		doc["clusterDNS"] = anyList(w.clusterDNS)
	}
}

// mutateForWindows is kubeadm's (componentconfigs/kubelet_windows.go,
// Mutate): no resolv.conf, and the Unix-absolute paths of a config written
// on a Linux control plane prefixed with the drive, which Go on Windows
// needs to see them as absolute.
func mutateForWindows(doc kubeletDoc, drive string) {
	doc["resolvConf"] = ""
	prefixDrive(doc, drive, "staticPodPath")
	prefixDrive(doc, drive, "authentication", "x509", "clientCAFile")
}

// prefixDrive turns a /unix/path at path into drive\unix\path.
func prefixDrive(doc kubeletDoc, drive string, path ...string) {
	m := map[string]any(doc)
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	last := path[len(path)-1]
	if p, ok := m[last].(string); ok && strings.HasPrefix(p, "/") {
		m[last] = drive + strings.ReplaceAll(p, "/", `\`)
	}
}

// setRequired sets what a Windows kubelet cannot run without (no cgroups,
// so neither QoS cgroups nor node allocatable enforcement; containerd's
// named pipe) and what wsu's join relies on: rotating certificates, a
// serving certificate by CSR (join approves it), no anonymous requests,
// and the kubelet CA wsu writes.
func setRequired(doc kubeletDoc, w windowsKubelet) {
	if s, _ := doc["apiVersion"].(string); s == "" {
		doc["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	}
	doc["kind"] = "KubeletConfiguration"
	doc["cgroupsPerQOS"] = false
	doc["enforceNodeAllocatable"] = []any{"none"}
	doc["containerRuntimeEndpoint"] = `npipe://./pipe/containerd-containerd`
	doc["resolvConf"] = ""
	doc["rotateCertificates"] = true
	doc["serverTLSBootstrap"] = w.serverTLSBootstrap
	setNested(doc, false, "authentication", "anonymous", "enabled")
	setNested(doc, w.clientCAFile, "authentication", "x509", "clientCAFile")
}

// setNested sets doc[path...] = v, creating the maps on the way (and
// replacing a non-map in the way, which a kubelet would refuse anyway).
func setNested(doc kubeletDoc, v any, path ...string) {
	m := map[string]any(doc)
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// render is the document as YAML. encoding/json sorts map keys, so the same
// document always renders to the same bytes (a re-run rewrites nothing).
func (doc kubeletDoc) render() (string, error) {
	js, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	y, err := yaml.JSONToYAML(js)
	return string(y), err
}

// stringList reads a list of strings at key, ignoring other entries.
func (doc kubeletDoc) stringList(key string) []string {
	l, _ := doc[key].([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
