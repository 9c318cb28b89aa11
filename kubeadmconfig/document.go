package kubeadmconfig

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/kube/tokenjoin"
)

// The fields of each version's types (kubeadm's
// cmd/kubeadm/app/apis/kubeadm/v1beta3 and v1beta4 types.go).
var (
	joinFields = map[string][]string{
		"v1beta3": {"apiVersion", "kind", "nodeRegistration", "caCertPath", "discovery", "controlPlane", "skipPhases", "patches"},
		"v1beta4": {"apiVersion", "kind", "dryRun", "nodeRegistration", "caCertPath", "discovery", "controlPlane", "skipPhases", "patches", "timeouts"},
	}
	discoveryFields = map[string][]string{
		"v1beta3": {"bootstrapToken", "file", "tlsBootstrapToken", "timeout"},
		"v1beta4": {"bootstrapToken", "file", "tlsBootstrapToken"},
	}
	nodeRegistrationFields = map[string][]string{
		"v1beta3": {"name", "criSocket", "taints", "kubeletExtraArgs", "ignorePreflightErrors", "imagePullPolicy"},
		"v1beta4": {"name", "criSocket", "taints", "kubeletExtraArgs", "ignorePreflightErrors", "imagePullPolicy", "imagePullSerial"},
	}
	bootstrapTokenFields = []string{"token", "apiServerEndpoint", "caCertHashes", "unsafeSkipCAVerification"}
	taintFields          = []string{"key", "value", "effect", "timeAdded"}
	argFields            = []string{"name", "value"}
	patchesFields        = []string{"directory"}
	timeoutsFields       = []string{"controlPlaneComponentHealthCheck", "kubeletHealthCheck", "kubernetesAPICall", "etcdAPICall", "tlsBootstrap", "discovery", "upgradeManifests"}
)

// containerdPipes are the CRI sockets wsu's join runs the kubelet with:
// containerd's named pipe, in kubeadm's spelling and crictl's.
var containerdPipes = []string{"npipe:////./pipe/containerd-containerd", "npipe://./pipe/containerd-containerd"}

// join reads the JoinConfiguration document.
func (p *parser) join(doc *yaml.Node) {
	_, p.version, _ = strings.Cut(child(doc, "apiVersion").Value, "/")
	p.j.APIVersion = Group + "/" + p.version
	top := p.fields(doc, "", joinFields[p.version])
	if cp := top["controlPlane"]; cp != nil && !isNull(cp) {
		p.errorf(cp, "Control-plane join not supported", "controlPlane makes kubeadm join a control-plane node; wsu joins Windows workers, which cannot run the control plane. Remove controlPlane.")
	}
	if p.boolean(top["dryRun"], "dryRun") {
		p.errorf(top["dryRun"], "dryRun not supported", "dryRun: true asks kubeadm to change nothing; wsu would not honour it here. Run wsu plan instead, which changes nothing, and remove dryRun.")
	}
	p.str(top["caCertPath"], "caCertPath") // kubeadm's own file; wsu keeps the CA where its kubelet reads it
	p.strings(top["skipPhases"], "skipPhases")
	p.str(p.fields(top["patches"], "patches", patchesFields)["directory"], "patches.directory")
	for k, v := range p.fields(top["timeouts"], "timeouts", timeoutsFields) {
		if k == "discovery" {
			p.j.DiscoveryTimeout = p.duration(v, "timeouts.discovery")
			continue
		}
		p.str(v, "timeouts."+k)
	}
	p.discovery(top["discovery"], doc)
	p.nodeRegistration(top["nodeRegistration"])
}

// discovery reads discovery: bootstrap-token discovery only.
func (p *parser) discovery(n, doc *yaml.Node) {
	if n == nil || isNull(n) {
		p.errorf(doc, "No discovery", "The JoinConfiguration has no discovery; wsu needs discovery.bootstrapToken (token, apiServerEndpoint, caCertHashes).")
		return
	}
	f := p.fields(n, "discovery", discoveryFields[p.version])
	if file := f["file"]; file != nil && !isNull(file) {
		p.errorf(file, "File discovery not supported", "discovery.file reads the cluster from a kubeconfig; wsu's node-only join supports only bootstrap-token discovery (discovery.bootstrapToken), as Cluster API writes it.")
		return
	}
	if t := p.duration(f["timeout"], "discovery.timeout"); t > 0 {
		p.j.DiscoveryTimeout = t
	}
	bt := f["bootstrapToken"]
	if bt == nil || isNull(bt) {
		p.errorf(n, "No bootstrap token", "discovery has no bootstrapToken; wsu's node-only join supports only bootstrap-token discovery.")
		return
	}
	p.bootstrapToken(bt)
	if tls := f["tlsBootstrapToken"]; tls != nil && !isNull(tls) {
		t := p.str(tls, "discovery.tlsBootstrapToken")
		p.j.Secrets = append(p.j.Secrets, p.s.at(tls))
		if t != "" && p.j.Token != "" && t != p.j.Token {
			p.errorf(tls, "Different TLS bootstrap token", "discovery.tlsBootstrapToken differs from discovery.bootstrapToken.token; wsu's join uses one token for discovery and for the kubelet's TLS bootstrap. Remove tlsBootstrapToken (it defaults to the discovery token) or make it the same.")
		}
	}
}

// bootstrapToken reads discovery.bootstrapToken and checks it as kubeadm's
// validation does.
func (p *parser) bootstrapToken(n *yaml.Node) {
	const path = "discovery.bootstrapToken"
	f := p.fields(n, path, bootstrapTokenFields)
	p.j.Token = p.str(f["token"], path+".token")
	if tok := f["token"]; tok == nil || isNull(tok) || p.j.Token == "" {
		p.errorf(n, "No bootstrap token", "%s.token is required: the bootstrap token <id>.<secret> (kubeadm token create prints one).", path)
	} else {
		p.j.Secrets = append(p.j.Secrets, p.s.at(tok))
		if _, _, err := tokenjoin.ParseBootstrapToken(p.j.Token); err != nil {
			p.errorf(tok, "Invalid bootstrap token", "%s.token is not a bootstrap token: want <id>.<secret>, 6 and 16 characters of a-z and 0-9 (the value is not shown: it is a secret).", path)
		}
	}
	p.j.APIServerEndpoint = p.str(f["apiServerEndpoint"], path+".apiServerEndpoint")
	if ep := f["apiServerEndpoint"]; ep == nil || isNull(ep) || p.j.APIServerEndpoint == "" {
		p.errorf(n, "No API server endpoint", "%s.apiServerEndpoint is required: the API server's host:port (Cluster API writes the cluster's control-plane endpoint).", path)
	} else if _, err := tokenjoin.ParseAPIServerEndpoint(p.j.APIServerEndpoint); err != nil {
		p.errorf(ep, "Invalid API server endpoint", "%s.apiServerEndpoint: %v.", path, err)
	}
	pins, nodes := p.strings(f["caCertHashes"], path+".caCertHashes")
	for i, pin := range pins {
		var err error
		if pins[i], err = tokenjoin.ParseCACertHash(pin); err != nil {
			p.errorf(nodes[i], "Invalid CA certificate hash", "%s.caCertHashes[%d]: %v.", path, i, err)
		}
	}
	p.j.CACertHashes = pins
	p.j.UnsafeSkipCAVerification = p.boolean(f["unsafeSkipCAVerification"], path+".unsafeSkipCAVerification")
	if len(pins) == 0 && !p.j.UnsafeSkipCAVerification {
		p.errorf(n, "No CA certificate hashes", "%s has no caCertHashes: without them the cluster's CA cannot be verified. Add the sha256:<hex> pin of the CA's public key, or set unsafeSkipCAVerification: true to trust whichever CA answers (kubeadm refuses the same).", path)
	}
}

// nodeRegistration reads the node's name, CRI socket, taints and kubelet
// arguments.
func (p *parser) nodeRegistration(n *yaml.Node) {
	const path = "nodeRegistration"
	f := p.fields(n, path, nodeRegistrationFields[p.version])
	p.j.NodeName = p.str(f["name"], path+".name")
	if p.j.NodeName != "" {
		if errs := validation.IsDNS1123Subdomain(p.j.NodeName); len(errs) > 0 {
			p.errorf(f["name"], "Invalid node name", "%s.name %q is not a Kubernetes node name: %s.", path, p.j.NodeName, strings.Join(errs, "; "))
		}
	}
	if cri := p.str(f["criSocket"], path+".criSocket"); cri != "" && !contains(containerdPipes, cri) {
		p.errorf(f["criSocket"], "Unsupported CRI socket", "%s.criSocket %q is not containerd's named pipe; wsu's join runs the kubelet on containerd (%s).", path, cri, containerdPipes[0])
	}
	p.str(f["imagePullPolicy"], path+".imagePullPolicy")
	p.boolean(f["imagePullSerial"], path+".imagePullSerial")
	if ignored, _ := p.strings(f["ignorePreflightErrors"], path+".ignorePreflightErrors"); len(ignored) > 0 {
		p.warnf(f["ignorePreflightErrors"], "Preflight errors not ignored", "%s.ignorePreflightErrors names kubeadm's preflight checks; wsu's are its own and still run.", path)
	}
	p.taints(f["taints"])
	p.kubeletArgs(f["kubeletExtraArgs"])
}

// taints reads nodeRegistration.taints: null or absent leaves the node
// untainted by this file, an explicit list (even []) sets them.
func (p *parser) taints(n *yaml.Node) {
	const path = "nodeRegistration.taints"
	if n == nil || isNull(n) {
		return
	}
	p.j.TaintsSet = true
	p.j.Taints = []Taint{}
	for i, item := range p.list(n, path) {
		at := fmt.Sprintf("%s[%d]", path, i)
		f := p.fields(item, at, taintFields)
		t := Taint{Key: p.str(f["key"], at+".key"), Value: p.str(f["value"], at+".value"), Effect: p.str(f["effect"], at+".effect")}
		p.str(f["timeAdded"], at+".timeAdded")
		if t.Key == "" {
			p.errorf(item, "Invalid taint", "%s has no key.", at)
		}
		if !contains([]string{"NoSchedule", "PreferNoSchedule", "NoExecute"}, t.Effect) {
			p.errorf(item, "Invalid taint", "%s.effect must be NoSchedule, PreferNoSchedule or NoExecute.", at)
		}
		p.j.Taints = append(p.j.Taints, t)
	}
}

// kubeletArgs reads kubeletExtraArgs: a mapping in v1beta3, a list of
// {name, value} in v1beta4 (where a name may repeat).
func (p *parser) kubeletArgs(n *yaml.Node) {
	const path = "nodeRegistration.kubeletExtraArgs"
	if n == nil || isNull(n) || p.alias(n, path) {
		return
	}
	if p.version == "v1beta3" {
		if n.Kind != yaml.MappingNode {
			p.errorf(n, "Invalid join configuration", "In %s/v1beta3 %s is a mapping of flag names to values (a list of {name, value} is v1beta4's form).", Group, path)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p.kubeletArg(p.str(k, path+" key"), p.str(v, path+"."+k.Value), k)
		}
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "Invalid join configuration", "In %s/v1beta4 %s is a list of {name, value} (a mapping is v1beta3's form).", Group, path)
		return
	}
	for i, item := range n.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		f := p.fields(item, at, argFields)
		p.kubeletArg(p.str(f["name"], at+".name"), p.str(f["value"], at+".value"), item)
	}
}

// kubeletArg sorts one kubelet flag into node_labels, node_ip or
// extra_kubelet_args.
func (p *parser) kubeletArg(flag, value string, at *yaml.Node) {
	switch {
	case flag == "":
		p.errorf(at, "Invalid kubelet argument", "A kubeletExtraArgs entry has no name.")
	case strings.HasPrefix(flag, "-"):
		p.errorf(at, "Invalid kubelet argument", "kubeletExtraArgs names flags without leading dashes (%q, not %q).", strings.TrimLeft(flag, "-"), flag)
	case flag == "node-labels":
		for _, l := range strings.Split(value, ",") {
			if l = strings.TrimSpace(l); l != "" {
				p.j.NodeLabels = append(p.j.NodeLabels, l)
			}
		}
	case flag == "node-ip":
		if p.j.NodeIP != "" && p.j.NodeIP != value {
			p.errorf(at, "Repeated kubelet argument", "kubeletExtraArgs sets node-ip twice, to different addresses.")
		}
		p.j.NodeIP = value
	default:
		p.j.ExtraKubeletArgs = append(p.j.ExtraKubeletArgs, "--"+flag+"="+value)
	}
}

// duration reads a kubeadm duration ("5m0s"); 0 when absent.
func (p *parser) duration(n *yaml.Node, path string) time.Duration {
	text := p.str(n, path)
	if text == "" {
		return 0
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		p.errorf(n, "Invalid duration", "%s %q is not a positive duration such as \"5m0s\".", path, text)
		return 0
	}
	return d
}
