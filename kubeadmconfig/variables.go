package kubeadmconfig

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Variable is one value the join playbook takes, with where the file says
// it.
type Variable struct {
	Name  string
	Value cty.Value
	Range hcl.Range
	// Secret marks the token: sensitive wherever it goes, whatever the
	// playbook declares.
	Secret bool
}

// TaintType is node_taints' element type.
var TaintType = cty.Object(map[string]cty.Type{"key": cty.String, "value": cty.String, "effect": cty.String})

// Variables are the join playbook's variables this configuration sets:
// always cluster_flavour ("kubeadm"), api_server_endpoint, bootstrap_token,
// ca_cert_hashes and unsafe_skip_ca_verification; node_name, node_ip,
// node_labels, extra_kubelet_args, node_taints and discovery_timeout only
// when the file says them, so a playbook default or another input stands otherwise.
func (j *Join) Variables() []Variable {
	at := func(path string) hcl.Range {
		if r, ok := j.Ranges[path]; ok {
			return r
		}
		return j.Kind
	}
	vars := []Variable{
		{Name: "cluster_flavour", Value: cty.StringVal("kubeadm"), Range: j.Kind},
		{Name: "api_server_endpoint", Value: cty.StringVal(j.APIServerEndpoint), Range: at("discovery.bootstrapToken.apiServerEndpoint")},
		{Name: "bootstrap_token", Value: cty.StringVal(j.Token), Range: at("discovery.bootstrapToken.token"), Secret: true},
		{Name: "ca_cert_hashes", Value: stringList(j.CACertHashes), Range: at("discovery.bootstrapToken.caCertHashes")},
		{Name: "unsafe_skip_ca_verification", Value: cty.BoolVal(j.UnsafeSkipCAVerification), Range: at("discovery.bootstrapToken.unsafeSkipCAVerification")},
	}
	args := at("nodeRegistration.kubeletExtraArgs")
	if j.NodeName != "" {
		vars = append(vars, Variable{Name: "node_name", Value: cty.StringVal(j.NodeName), Range: at("nodeRegistration.name")})
	}
	if j.NodeIP != "" {
		vars = append(vars, Variable{Name: "node_ip", Value: cty.StringVal(j.NodeIP), Range: args})
	}
	if len(j.NodeLabels) > 0 {
		vars = append(vars, Variable{Name: "node_labels", Value: stringList(j.NodeLabels), Range: args})
	}
	if len(j.ExtraKubeletArgs) > 0 {
		vars = append(vars, Variable{Name: "extra_kubelet_args", Value: stringList(j.ExtraKubeletArgs), Range: args})
	}
	if j.DiscoveryTimeout > 0 {
		rng := at("discovery.timeout")
		if _, ok := j.Ranges["timeouts.discovery"]; ok {
			rng = at("timeouts.discovery")
		}
		vars = append(vars, Variable{Name: "discovery_timeout", Value: cty.NumberIntVal(int64(j.DiscoveryTimeout.Seconds())), Range: rng})
	}
	if j.TaintsSet {
		vars = append(vars, Variable{Name: "node_taints", Value: taintList(j.Taints), Range: at("nodeRegistration.taints")})
	}
	return vars
}

func stringList(list []string) cty.Value {
	if len(list) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(list))
	for i, s := range list {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

func taintList(taints []Taint) cty.Value {
	if len(taints) == 0 {
		return cty.ListValEmpty(TaintType)
	}
	vals := make([]cty.Value, len(taints))
	for i, t := range taints {
		vals[i] = cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(t.Key), "value": cty.StringVal(t.Value), "effect": cty.StringVal(t.Effect)})
	}
	return cty.ListVal(vals)
}
