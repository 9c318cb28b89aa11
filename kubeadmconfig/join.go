// Package kubeadmconfig reads a kubeadm JoinConfiguration, as Cluster API's
// kubeadm bootstrap provider (CABPK) writes it to
// /run/kubeadm/kubeadm-join-config.yaml and cloudbase-init writes it on a
// Windows machine, and turns it into the variables of wsu's join playbook
// (wsu apply join --local --join-config FILE). A node that Cluster API
// creates then joins with wsu from the same file kubeadm join would read.
//
// The contract:
//   - kubeadm.k8s.io/v1beta3 and v1beta4 are read (kubeadm's own types,
//     mirrored by small structs here rather than imported from
//     k8s.io/kubernetes). A file may hold several YAML documents: exactly
//     one must be a JoinConfiguration; other kinds (a KubeletConfiguration,
//     a ClusterConfiguration) are ignored with a warning, as kubeadm join
//     ignores them.
//   - As kubeadm decodes strictly, an unknown or repeated field is an
//     error; so is a value of the wrong YAML type.
//   - Only what a Windows worker join means is accepted: bootstrap-token
//     discovery (file discovery, a control-plane join, a CRI socket other
//     than containerd's named pipe and a TLS bootstrap token other than the
//     discovery token are refused). Fields that configure kubeadm's own
//     run (caCertPath, timeouts, patches, skipPhases, imagePullPolicy) are
//     read and ignored; ignorePreflightErrors gets a warning, since wsu's
//     preflight checks are not kubeadm's.
//   - Every diagnostic is located (file:line:column) and none quotes the
//     token, which is the node's only credential: Join.Secrets says where
//     it is in the file, for whoever shows the file's lines.
package kubeadmconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"gopkg.in/yaml.v3"

	"github.com/wsu-project/wsu/limits"
)

// Group is the API group of kubeadm's configuration files.
const Group = "kubeadm.k8s.io"

// Versions are the kubeadm configuration versions read, oldest first.
var Versions = []string{"v1beta3", "v1beta4"}

// Join is what a JoinConfiguration says about joining this node, in the
// terms of wsu's join playbook.
type Join struct {
	// APIVersion is kubeadm.k8s.io/v1beta3 or kubeadm.k8s.io/v1beta4.
	APIVersion string
	// APIServerEndpoint is discovery.bootstrapToken.apiServerEndpoint,
	// host:port.
	APIServerEndpoint string
	// Token is discovery.bootstrapToken.token, <id>.<secret>: a secret.
	Token string
	// CACertHashes are the sha256:<hex> pins of the cluster CA's public key.
	CACertHashes []string
	// UnsafeSkipCAVerification is kubeadm's: no pins, trust the CA found.
	UnsafeSkipCAVerification bool
	// DiscoveryTimeout is discovery.timeout (v1beta3) or
	// timeouts.discovery (v1beta4); 0 when not set.
	DiscoveryTimeout time.Duration
	// NodeName is nodeRegistration.name; "" when not set.
	NodeName string
	// NodeIP is kubeletExtraArgs' node-ip; "" when not set.
	NodeIP string
	// NodeLabels are kubeletExtraArgs' node-labels, split at commas.
	NodeLabels []string
	// ExtraKubeletArgs are the other kubeletExtraArgs as --name=value, in
	// the file's order.
	ExtraKubeletArgs []string
	// Taints are nodeRegistration.taints; TaintsSet is false when the file
	// has none (null or absent), true for an explicit list, even empty.
	Taints    []Taint
	TaintsSet bool

	// Secrets are where the token's text is in the file (token and
	// tlsBootstrapToken), so a view can leave those bytes out.
	Secrets []hcl.Range
	// Ranges locate each field read, by its kubeadm path
	// ("discovery.bootstrapToken.token"): where a value that fails later
	// checks came from.
	Ranges map[string]hcl.Range
	// Kind is where the JoinConfiguration's kind is: the document itself.
	Kind hcl.Range
}

// Taint is a nodeRegistration taint.
type Taint struct {
	Key, Value, Effect string
}

// Parse reads a join configuration file's content. filename names it in
// diagnostics. Join is nil when there are errors.
func Parse(filename string, src []byte) (*Join, hcl.Diagnostics) {
	if d := limits.CheckYAML(src, filename); d.HasErrors() {
		return nil, d
	}
	s := newSource(filename, src)
	docs, diags := documents(s)
	if diags.HasErrors() {
		return nil, diags
	}
	var joins []*yaml.Node
	for _, doc := range docs {
		if isJoin, d := checkKind(s, doc); isJoin {
			joins = append(joins, doc)
		} else {
			diags = append(diags, d...)
		}
	}
	switch {
	case diags.HasErrors():
		return nil, diags
	case len(joins) == 0:
		r := s.line(1)
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No JoinConfiguration",
			Detail:  fmt.Sprintf("%s holds no document of kind JoinConfiguration (apiVersion %s/%s); --join-config reads the file kubeadm join --config reads.", filename, Group, Versions[len(Versions)-1]),
			Subject: &r})
	case len(joins) > 1:
		r := s.at(joins[1])
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Two JoinConfigurations",
			Detail:  fmt.Sprintf("%s holds more than one JoinConfiguration; kubeadm join reads one. Keep one.", filename),
			Subject: &r})
	}
	p := &parser{s: s, j: &Join{Ranges: map[string]hcl.Range{}, Kind: s.at(joins[0])}}
	p.join(joins[0])
	diags = append(diags, p.diags...)
	if diags.HasErrors() {
		return nil, diags
	}
	return p.j, diags
}

// documents are the file's YAML documents that hold something, each a
// mapping.
func documents(s *source) ([]*yaml.Node, hcl.Diagnostics) {
	dec := yaml.NewDecoder(bytes.NewReader(s.src))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := safeDecode(dec, &doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, hcl.Diagnostics{s.syntaxError(err)}
		}
		if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
			continue // an empty document, as after a leading ---
		}
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode {
			r := s.at(root)
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Not a kubeadm configuration",
				Detail: "Each YAML document of a join configuration is a mapping with apiVersion and kind.", Subject: &r}}
		}
		docs = append(docs, root)
	}
}

// safeDecode is Decode with the parser's panics (it has had some on
// hostile input) turned into errors.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

// checkKind reports whether doc is a JoinConfiguration this package
// reads. Any other kind is ignored with a warning; a JoinConfiguration of
// another apiVersion, or a document without apiVersion and kind, is an
// error.
func checkKind(s *source, doc *yaml.Node) (bool, hcl.Diagnostics) {
	apiVersion, kind := child(doc, "apiVersion"), child(doc, "kind")
	if apiVersion == nil || kind == nil || apiVersion.Kind != yaml.ScalarNode || kind.Kind != yaml.ScalarNode {
		r := s.at(doc)
		return false, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Not a kubeadm configuration",
			Detail: "Each document needs apiVersion and kind (apiVersion: kubeadm.k8s.io/v1beta4, kind: JoinConfiguration).", Subject: &r}}
	}
	if kind.Value != "JoinConfiguration" {
		r := s.at(kind)
		return false, hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Document ignored",
			Detail: fmt.Sprintf("A %s (%s) is not read by --join-config, as kubeadm join ignores it: wsu reads only the JoinConfiguration.", kind.Value, apiVersion.Value), Subject: &r}}
	}
	group, version, _ := strings.Cut(apiVersion.Value, "/")
	if group != Group || !contains(Versions, version) {
		r := s.at(apiVersion)
		return false, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported apiVersion",
			Detail: fmt.Sprintf("A JoinConfiguration of apiVersion %q is not read; wsu reads %s/%s (kubeadm's supported versions).", apiVersion.Value, Group, strings.Join(Versions, " and "+Group+"/")), Subject: &r}}
	}
	return true, nil
}

// child is the value of key in mapping n, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
