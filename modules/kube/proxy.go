package kube

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// Proxy reads the cluster-wide proxy of an OpenShift cluster
// (proxy.config.openshift.io/cluster), so the join playbook sets what the
// cluster says rather than values copied into variables that go stale when
// the admin changes the Proxy (WMCO sets the same on its nodes, from the
// same object). A cluster without the object (vanilla Kubernetes) has no
// proxy: every value is null, and nothing changes on the node.
type Proxy struct{ Clusters }

var _ modules.Module = Proxy{}

var proxyResults = []modules.Attribute{
	{Name: "http_proxy", Type: cty.String, Description: "The cluster's HTTP proxy URL; \"\" when the Proxy sets none; null when the cluster has no Proxy."},
	{Name: "https_proxy", Type: cty.String, Description: "The cluster's HTTPS proxy URL; \"\" when the Proxy sets none; null when the cluster has no Proxy."},
	{Name: "no_proxy", Type: cty.String, Description: "Hosts and networks reached without the proxy (comma-separated); \"\" when none; null when the cluster has no Proxy."},
	{Name: "reason", Type: cty.String, Description: "Where the values come from, in a sentence."},
}

func (Proxy) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_proxy",
		Summary: "Read the cluster-wide proxy (OpenShift's proxy.config.openshift.io/cluster).",
		Description: "Read-only. Returns `httpProxy`, `httpsProxy` and `noProxy` of the Proxy `cluster` " +
			"(`config.openshift.io/v1`) from its status, the values the cluster network operator made " +
			"effective (`noProxy` there includes the cluster's own networks), or from its spec while the " +
			"status holds none yet. A field the Proxy leaves empty is \"\" (no proxy for it: join removes " +
			"the machine environment variable, as WMCO does). A cluster that does not serve proxies " +
			"(vanilla Kubernetes) or has no Proxy `cluster` has no proxy: the values are null and the " +
			"reason says why.",
		Target:     modules.TargetController,
		Attributes: withConn(),
		Results:    proxyResults,
		Show:       "reason",
		Example: `task "cluster proxy" {
  k8s_proxy {}
}`,
	}
}

// clusterProxy is what the Proxy says; found is false without one.
type clusterProxy struct {
	found                  bool
	http, https, no, where string
}

func readProxy(ctx context.Context, cl *kube.Client) (clusterProxy, error) {
	p, absent, err := getClusterProxy(ctx, cl)
	switch {
	case err != nil:
		return clusterProxy{}, err
	case p == nil:
		return clusterProxy{where: "no proxy: " + absent}, nil
	}
	if st := proxyFields(p, "status"); st.http != "" || st.https != "" || st.no != "" {
		return st, nil
	}
	return proxyFields(p, "spec"), nil
}

// getClusterProxy reads OpenShift's proxy.config.openshift.io/cluster, which
// both the proxy and the trusted CA come from. A cluster without it is no
// error: the object is nil and absent says why (the kind is not served, or
// there is no object named cluster).
func getClusterProxy(ctx context.Context, cl *kube.Client) (p *unstructured.Unstructured, absent string, err error) {
	ok, err := served(cl, proxyGVR)
	if err != nil {
		return nil, "", fmt.Errorf("discovering %s: %w", proxyGVR.GroupVersion(), err)
	}
	if !ok {
		return nil, "the API server does not serve proxies.config.openshift.io", nil
	}
	p, err = cl.Dynamic.Resource(proxyGVR).Get(ctx, "cluster", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "there is no proxy.config.openshift.io/cluster", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading proxy.config.openshift.io/cluster: %w", err)
	}
	return p, "", nil
}

// proxyFields are the proxy's values in part (status or spec).
func proxyFields(p *unstructured.Unstructured, part string) clusterProxy {
	field := func(name string) string {
		v, _, _ := unstructured.NestedString(p.Object, part, name)
		return v
	}
	return clusterProxy{found: true, http: field("httpProxy"), https: field("httpsProxy"), no: field("noProxy"),
		where: "from proxy.config.openshift.io/cluster " + part}
}

func (m Proxy) read(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known {
		return unknownResult(proxyResults), diags
	}
	p, err := readProxy(ctx, cl)
	if err != nil {
		return unknownResult(proxyResults), apiError(cfg, "kubeconfig", "Cannot read the cluster proxy", err)
	}
	vals := map[string]cty.Value{"reason": cty.StringVal(p.where)}
	if p.found {
		vals["http_proxy"], vals["https_proxy"], vals["no_proxy"] = cty.StringVal(p.http), cty.StringVal(p.https), cty.StringVal(p.no)
	}
	return result(proxyResults, vals), nil
}

func (m Proxy) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.read(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m Proxy) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.read(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
