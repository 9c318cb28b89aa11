package kube

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// TrustedCA reads the CA bundle an OpenShift cluster's proxy trusts: the
// certificates a node must trust to reach registries and the proxy in a
// disconnected or proxied cluster (WMCO copies the same bundle to its
// nodes).
type TrustedCA struct{ Clusters }

var _ modules.Module = TrustedCA{}

var proxyGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "proxies"}

// Where OpenShift keeps the proxy's trusted CA ConfigMap, and its key.
const (
	TrustedCANamespace = "openshift-config"
	TrustedCAKey       = "ca-bundle.crt"
)

var trustedCAResults = []modules.Attribute{
	{Name: "bundle", Type: cty.String, Description: "The PEM bundle (`ca-bundle.crt`); \"\" when the proxy names no trusted CA or the cluster is not OpenShift."},
	{Name: "configmap", Type: cty.String, Description: "The ConfigMap read (`openshift-config/<name>`); null when none."},
	{Name: "reason", Type: cty.String, Description: "What was found, in a sentence."},
}

func (TrustedCA) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_trusted_ca",
		Summary: "Read the CA bundle the cluster's proxy configuration trusts (OpenShift).",
		Description: "Read-only. `proxy.config.openshift.io/cluster` `spec.trustedCA.name` names a ConfigMap in " +
			"`" + TrustedCANamespace + "` whose `" + TrustedCAKey + "` holds the user's CA certificates " +
			"(registries, the proxy). The result is that bundle, for `win_certificate`. No proxy object, " +
			"no `trustedCA`, or a cluster without the `config.openshift.io` proxies resource: the bundle is " +
			"\"\" and the reason says why. A named ConfigMap that is missing or lacks the key fails the task.",
		Target:     modules.TargetController,
		Attributes: withConn(),
		Results:    trustedCAResults,
		Show:       "reason",
		Example: `task "trusted ca" {
  k8s_trusted_ca {}
}`,
	}
}

type trustedBundle struct {
	bundle, configmap, reason string
}

func readTrustedCA(ctx context.Context, cl *kube.Client) (trustedBundle, error) {
	proxy, absent, err := getClusterProxy(ctx, cl) // proxy.go
	switch {
	case err != nil:
		return trustedBundle{}, err
	case proxy == nil:
		return trustedBundle{reason: "no trusted CA: " + absent}, nil
	}
	name, _, _ := unstructured.NestedString(proxy.Object, "spec", "trustedCA", "name")
	if name == "" {
		return trustedBundle{reason: "no trusted CA: proxy.config.openshift.io/cluster has no spec.trustedCA.name"}, nil
	}
	cm, err := cl.Kube.CoreV1().ConfigMaps(TrustedCANamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return trustedBundle{}, fmt.Errorf("reading ConfigMap %s/%s, which proxy.config.openshift.io/cluster spec.trustedCA names: %w", TrustedCANamespace, name, err)
	}
	bundle, ok := cm.Data[TrustedCAKey]
	if !ok {
		return trustedBundle{}, fmt.Errorf("ConfigMap %s/%s, which proxy.config.openshift.io/cluster spec.trustedCA names, has no %s", TrustedCANamespace, name, TrustedCAKey)
	}
	return trustedBundle{bundle: bundle, configmap: TrustedCANamespace + "/" + name,
		reason: fmt.Sprintf("trusted CA bundle from ConfigMap %s/%s", TrustedCANamespace, name)}, nil
}

func (m TrustedCA) read(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known {
		return unknownResult(trustedCAResults), diags
	}
	b, err := readTrustedCA(ctx, cl)
	if err != nil {
		return unknownResult(trustedCAResults), apiError(cfg, "kubeconfig", "Cannot read the trusted CA bundle", err)
	}
	vals := map[string]cty.Value{"bundle": cty.StringVal(b.bundle), "reason": cty.StringVal(b.reason)}
	if b.configmap != "" {
		vals["configmap"] = cty.StringVal(b.configmap)
	}
	return result(trustedCAResults, vals), nil
}

func (m TrustedCA) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.read(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m TrustedCA) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.read(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
