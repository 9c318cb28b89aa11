package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/test/kubetest"
)

const clusterInfoServer = "https://api.kubeadm.example.com:6443"

// publishClusterInfo plays kubeadm init, which publishes the API server and
// CA for joining nodes in kube-public/cluster-info.
func publishClusterInfo(t *testing.T, c *kubetest.Cluster, ca []byte) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: clusterInfoServer, CertificateAuthorityData: ca}
	kc, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	_, err = c.Client.CoreV1().ConfigMaps("kube-public").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
		Data:       map[string]string{"kubeconfig": string(kc)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func kubeconfigParts(t *testing.T, kc string) (server string, ca []byte, token string) {
	t.Helper()
	cfg, err := clientcmd.Load([]byte(kc))
	require.NoError(t, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, ctx)
	return cfg.Clusters[ctx.Cluster].Server, cfg.Clusters[ctx.Cluster].CertificateAuthorityData, cfg.AuthInfos[ctx.AuthInfo].Token
}

func TestBootstrapTokenCreateAndReuse(t *testing.T) {
	c := csrCluster(t)
	m := BootstrapToken{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{"kubeconfig": cty.StringVal(c.Kubeconfig), "ttl": cty.StringVal("2h")})

	// Without cluster-info the plan fails before creating anything.
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.True(t, plan.Diagnostics.HasErrors())
	assert.Contains(t, plan.Diagnostics[0].Detail, "kube-public/cluster-info")

	ca := []byte("-----BEGIN CERTIFICATE-----\nY2x1c3Rlci1jYQ==\n-----END CERTIFICATE-----\n")
	publishClusterInfo(t, c, ca)
	// A token that is not wsu's is never reused.
	_, err := c.Client.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-kubeadm", Namespace: "kube-system"},
		Type:       kube.BootstrapTokenType,
		StringData: map[string]string{"token-id": "kubead", "token-secret": "0123456789abcdef", "description": kube.DefaultTokenDescription,
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true", "auth-extra-groups": kube.DefaultBootstrapGroup,
			"expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	plan = m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	require.NotNil(t, plan.Change)
	assert.Equal(t, modules.Create, plan.Change.Action)
	assert.False(t, plan.Result.GetAttr("token").IsKnown())

	before := time.Now()
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	checkResult(t, m, resp.Result)
	r := resp.Result.AsValueMap()
	id := r["token_id"].AsString()
	assert.Regexp(t, `^[a-z0-9]{6}\.[a-z0-9]{16}$`, r["token"].AsString())
	assert.Equal(t, "system:bootstrap:"+id, r["requester"].AsString())

	secret, err := c.Client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, kube.BootstrapTokenType, secret.Type)
	assert.Equal(t, "wsu", secret.Labels[kube.ManagedByLabel])
	data := map[string]string{}
	for k, v := range secret.Data {
		data[k] = string(v)
	}
	exp, err := time.Parse(time.RFC3339, data["expiration"])
	require.NoError(t, err)
	assert.WithinDuration(t, before.Add(2*time.Hour), exp, time.Minute)
	assert.Equal(t, r["expiration"].AsString(), data["expiration"])
	delete(data, "expiration")
	assert.Equal(t, map[string]string{
		"token-id": id, "token-secret": r["token"].AsString()[7:], "description": kube.DefaultTokenDescription,
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
		"auth-extra-groups": "system:bootstrappers:wsu",
	}, data, "wsu's own group: kube-controller-manager does not auto-approve its CSRs")
	assert.Equal(t, "system:bootstrappers:wsu", r["group"].AsString())

	assert.Equal(t, string(ca), r["ca"].AsString())
	server, gotCA, token := kubeconfigParts(t, r["bootstrap_kubeconfig"].AsString())
	assert.Equal(t, clusterInfoServer, server)
	assert.Equal(t, ca, gotCA)
	assert.Equal(t, r["token"].AsString(), token)

	// Run again: the token is reused, the plan is empty and fully known.
	again := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
	assert.Nil(t, again.Change)
	assert.True(t, again.Result.IsWhollyKnown())
	assert.Equal(t, resp.Result, again.Result)

	// Another description is another purpose: a token of its own.
	other := cfgFor(t, m, map[string]cty.Value{"kubeconfig": cty.StringVal(c.Kubeconfig), "ttl": cty.StringVal("2h"),
		"description": cty.StringVal("wsu: lab"), "api_server": cty.StringVal("https://api-int.example.com:6443")})
	p := m.Plan(ctx, modules.PlanRequest{Config: other})
	require.NotNil(t, p.Change)

	// Less than half the TTL left: a fresh token.
	secret.Data["expiration"] = []byte(time.Now().Add(59 * time.Minute).UTC().Format(time.RFC3339))
	_, err = c.Client.CoreV1().Secrets("kube-system").Update(ctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	p = m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.NotNil(t, p.Change)
	fresh := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: p.Change})
	require.False(t, fresh.Diagnostics.HasErrors(), "%v", fresh.Diagnostics)
	assert.NotEqual(t, id, fresh.Result.GetAttr("token_id").AsString())

	// api_server overrides cluster-info's server.
	fresh = m.Apply(ctx, modules.ApplyRequest{Config: other, Change: p.Change})
	require.False(t, fresh.Diagnostics.HasErrors(), "%v", fresh.Diagnostics)
	server, _, _ = kubeconfigParts(t, fresh.Result.GetAttr("bootstrap_kubeconfig").AsString())
	assert.Equal(t, "https://api-int.example.com:6443", server)
}

// The kubeadm flow end to end: the token's requester is what the CSR
// approver accepts for the client certificate.
func TestBootstrapTokenRequesterApprovesKubeadmJoin(t *testing.T) {
	c := csrCluster(t)
	publishClusterInfo(t, c, []byte("ca"))
	tok := BootstrapToken{testClusters}
	tcfg := cfgFor(t, tok, map[string]cty.Value{"kubeconfig": cty.StringVal(c.Kubeconfig)})
	plan := tok.Plan(ctx, modules.PlanRequest{Config: tcfg})
	require.NotNil(t, plan.Change)
	tr := tok.Apply(ctx, modules.ApplyRequest{Config: tcfg, Change: plan.Change})
	require.False(t, tr.Diagnostics.HasErrors(), "%v", tr.Diagnostics)
	requester := tr.Result.GetAttr("requester").AsString()

	k := clientCSR("kubeadm-client", "win-5", requester)
	k.groups = []string{kube.DefaultBootstrapGroup}
	createCSR(t, c, k)
	createCSR(t, c, clientCSR("other-token", "win-5", "system:bootstrap:zzzzzz"))

	m := CSRApprove{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"kubeconfig":        cty.StringVal(c.Kubeconfig),
		"node_name":         cty.StringVal("win-5"),
		"serving":           cty.False,
		"client_requesters": cty.ListVal([]cty.Value{cty.StringVal(requester)}),
		"timeout":           cty.NumberIntVal(10),
		"interval":          cty.NumberFloatVal(0.2),
	})
	p := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.NotNil(t, p.Change)
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: p.Change})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	assert.Equal(t, []string{"kubeadm-client"}, stringsOf(resp.Result.GetAttr("approved")))
	assert.Equal(t, map[string]string{"other-token": kube.RuleClientRequester}, rejectedRules(t, resp.Result.GetAttr("rejected")))
}

func TestBootstrapTokenValidate(t *testing.T) {
	m := BootstrapToken{testClusters}
	tests := []struct {
		name  string
		attrs map[string]cty.Value
		want  []string
	}{
		{"defaults", nil, nil},
		{"ttl", map[string]cty.Value{"ttl": cty.StringVal("90m")}, nil},
		{"bad ttl", map[string]cty.Value{"ttl": cty.StringVal("1 day")}, []string{"Invalid ttl"}},
		{"zero ttl", map[string]cty.Value{"ttl": cty.StringVal("0s")}, []string{"Invalid ttl"}},
		{"negative ttl", map[string]cty.Value{"ttl": cty.StringVal("-1h")}, []string{"Invalid ttl"}},
		{"empty description", map[string]cty.Value{"description": cty.StringVal(" ")}, []string{"Empty description"}},
		{"http api_server", map[string]cty.Value{"api_server": cty.StringVal("http://x")}, []string{"Invalid api_server"}},
		{"unknown ttl", map[string]cty.Value{"ttl": cty.UnknownVal(cty.String)}, nil},
		{"kubeadm's group", map[string]cty.Value{"group": cty.StringVal(kube.KubeadmNodeTokenGroup)}, nil},
		{"not a bootstrappers group", map[string]cty.Value{"group": cty.StringVal("system:nodes")}, []string{"Invalid group"}},
		{"bare bootstrappers prefix", map[string]cty.Value{"group": cty.StringVal("system:bootstrappers:")}, []string{"Invalid group"}},
		{"unknown group", map[string]cty.Value{"group": cty.UnknownVal(cty.String)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, diagSummaries(m.Validate(modules.ValidateRequest{Config: cfgFor(t, m, tt.attrs)})))
		})
	}
}

// TestBootstrapTokenParallelHostsShareOne: hosts joining in parallel all
// plan "create"; their applies still hand out one token, so a re-run finds
// every host's bootstrap kubeconfig unchanged.
func TestBootstrapTokenParallelHostsShareOne(t *testing.T) {
	c := csrCluster(t)
	publishClusterInfo(t, c, []byte("-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n"))
	m := BootstrapToken{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{"kubeconfig": cty.StringVal(c.Kubeconfig), "ttl": cty.StringVal("2h")})
	const hosts = 5
	plans := make([]modules.PlanResponse, hosts)
	for i := range plans {
		plans[i] = m.Plan(ctx, modules.PlanRequest{Config: cfg})
		require.NotNil(t, plans[i].Change, "every host plans a create before any applies")
	}
	tokens := make([]string, hosts)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plans[i].Change})
			if assert.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics) {
				tokens[i] = resp.Result.GetAttr("token").AsString()
			}
		}()
	}
	wg.Wait()
	for _, tok := range tokens[1:] {
		assert.Equal(t, tokens[0], tok)
	}
	list, err := c.Client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: kube.ManagedByLabel + "=wsu"})
	require.NoError(t, err)
	assert.Len(t, list.Items, 1, "one token created")
}
