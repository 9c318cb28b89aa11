package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestBootstrapTokenFreshPerJoin runs the module as a user holding only
// the shipped roles, which allow create and nothing else on Secrets in
// kube-system: every join mints a token of its own, and mint = false
// mints none and plans no change.
func TestBootstrapTokenFreshPerJoin(t *testing.T) {
	c := csrCluster(t)
	grant(t, c, "wsu-tokens")
	userKC, err := c.User("wsu-tokens")
	require.NoError(t, err)
	m := BootstrapToken{testClusters}
	attrs := map[string]cty.Value{"kubeconfig": cty.StringVal(userKC), "ttl": cty.StringVal("20m")}
	cfg := cfgFor(t, m, attrs)

	// Without cluster-info the plan fails before creating anything.
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.True(t, plan.Diagnostics.HasErrors())
	assert.Contains(t, plan.Diagnostics[0].Detail, "kube-public/cluster-info")

	ca := []byte("-----BEGIN CERTIFICATE-----\nY2x1c3Rlci1jYQ==\n-----END CERTIFICATE-----\n")
	publishClusterInfo(t, c, ca)
	plan = m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	require.NotNil(t, plan.Change)
	assert.Equal(t, modules.Create, plan.Change.Action)
	assert.False(t, plan.Result.GetAttr("token").IsKnown())
	assert.Equal(t, string(ca), plan.Result.GetAttr("ca").AsString(), "the CA is known at plan")
	assert.Equal(t, clusterInfoServer, plan.Result.GetAttr("api_server").AsString())

	before := time.Now()
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	checkResult(t, m, resp.Result)
	r := resp.Result.AsValueMap()
	id := r["token_id"].AsString()
	assert.Regexp(t, `^[a-z0-9]{6}\.[a-z0-9]{16}$`, r["token"].AsString())
	assert.Equal(t, "system:bootstrap:"+id, r["requester"].AsString())

	// What the module created, read as the admin: the module cannot.
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
	assert.WithinDuration(t, before.Add(20*time.Minute), exp, time.Minute, "expires ttl from now")
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

	// Another join: another token, never the first one read back.
	again := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
	require.NotNil(t, again.Change, "nothing is reused: a join that needs a token mints one")
	second := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: again.Change})
	require.False(t, second.Diagnostics.HasErrors(), "%v", second.Diagnostics)
	assert.NotEqual(t, id, second.Result.GetAttr("token_id").AsString())

	// A node with its client certificate: no token, no change, the CA and
	// server still there for the node's other files.
	attrs["mint"] = cty.False
	attrs["api_server"] = cty.StringVal("https://api-int.example.com:6443")
	joined := cfgFor(t, m, attrs)
	p := m.Plan(ctx, modules.PlanRequest{Config: joined})
	require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
	assert.Nil(t, p.Change)
	assert.True(t, p.Result.IsWhollyKnown())
	assert.True(t, p.Result.GetAttr("token").IsNull())
	assert.True(t, p.Result.GetAttr("bootstrap_kubeconfig").IsNull())
	assert.Equal(t, "https://api-int.example.com:6443", p.Result.GetAttr("api_server").AsString(), "api_server overrides cluster-info's")
	applied := m.Apply(ctx, modules.ApplyRequest{Config: joined})
	require.False(t, applied.Diagnostics.HasErrors(), "%v", applied.Diagnostics)
	assert.Equal(t, p.Result, applied.Result)
	list, err := c.Client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: kube.ManagedByLabel + "=wsu"})
	require.NoError(t, err)
	assert.Len(t, list.Items, 2, "one token per join that needed one")
}

// TestBootstrapTokenExpires: the token secret's expiration is what
// kube-controller-manager's tokencleaner acts on, so a join's token is
// gone once it expires, with no one (wsu included) deleting it.
func TestBootstrapTokenExpires(t *testing.T) {
	c := kubetest.Start(t, kubetest.WithKubeadmControllers())
	tok, err := kube.CreateBootstrapToken(ctx, c.Client, kube.TokenRequest{TTL: 3 * time.Second})
	require.NoError(t, err)
	name := tok.SecretName()
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().Secrets("kube-system").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 500*time.Millisecond, "tokencleaner deletes %s once it expires", name)
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
		{"a day", map[string]cty.Value{"ttl": cty.StringVal("24h")}, nil},
		{"longer than a day", map[string]cty.Value{"ttl": cty.StringVal("25h")}, []string{"Invalid ttl"}},
		{"under a minute", map[string]cty.Value{"ttl": cty.StringVal("30s")}, []string{"Invalid ttl"}},
		{"no mint", map[string]cty.Value{"mint": cty.False}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, diagSummaries(m.Validate(modules.ValidateRequest{Config: cfgFor(t, m, tt.attrs)})))
		})
	}
}
