package kube

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/test/kubetest"
)

// A joining kubelet's CSRs, and the forgeries the approver must refuse.
type kubeletCSR struct {
	name   string
	cn     string
	orgs   []string
	dns    []string
	ips    []string
	signer string
	usages []certificatesv1.KeyUsage
	// as is who creates it; groups are added to the impersonated user.
	as     string
	groups []string
	// viaCert creates it with a client certificate for as in groups
	// instead of impersonation.
	viaCert bool
	// key signs the request (default a new ECDSA P-256 key, as a
	// kubelet's); tamper breaks the signature.
	key    crypto.Signer
	tamper bool
}

var (
	clientUsages  = []certificatesv1.KeyUsage{"digital signature", "key encipherment", "client auth"}
	servingUsages = []certificatesv1.KeyUsage{"digital signature", "key encipherment", "server auth"}
	nodeGroups    = []string{"system:nodes"}
)

func clientCSR(name, node, as string) kubeletCSR {
	return kubeletCSR{name: name, cn: "system:node:" + node, orgs: []string{"system:nodes"},
		signer: certificatesv1.KubeAPIServerClientKubeletSignerName, usages: clientUsages, as: as}
}

func servingCSR(name, node string, ips ...string) kubeletCSR {
	return kubeletCSR{name: name, cn: "system:node:" + node, orgs: []string{"system:nodes"},
		dns: []string{node}, ips: ips, signer: certificatesv1.KubeletServingSignerName, usages: servingUsages,
		as: "system:node:" + node, groups: nodeGroups}
}

// csrCluster is a cluster where every authenticated user may create CSRs,
// as the system:node-bootstrapper role allows bootstrap identities to.
func csrCluster(t *testing.T) *kubetest.Cluster {
	t.Helper()
	c := kubetest.Start(t)
	_, err := c.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-csr-creators"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:authenticated"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.AwaitRBAC(context.Background()), "the authorizer sees the binding before the first CSR")
	return c
}

// createCSR submits a CSR as its requester, through impersonation by the
// admin, so the API server fills in spec.username and groups itself.
func createCSR(t *testing.T, c *kubetest.Cluster, k kubeletCSR) {
	t.Helper()
	require.NoError(t, submitCSR(c, k), "creating CSR %s as %s", k.name, k.as)
}

// submitCSR is createCSR for goroutines, which must not end the test.
func submitCSR(c *kubetest.Cluster, k kubeletCSR) error {
	key := k.key
	if key == nil {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return err
		}
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: k.cn, Organization: k.orgs}, DNSNames: k.dns}
	for _, ip := range k.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return err
	}
	if k.tamper {
		der[len(der)-3] ^= 0xff // inside the signature
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: k.as, Groups: k.groups}
	if k.viaCert {
		// Impersonating a node user always makes it a node (constrained
		// impersonation); a certificate gives exactly the groups asked for.
		path, err := c.User(k.as, k.groups...)
		if err != nil {
			return err
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return err
		}
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: k.name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: k.signer,
			Usages:     k.usages,
		},
	}
	// The RBAC authorizer sees a new binding a moment after it is created.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = kc.CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func csrState(t *testing.T, c *kubetest.Cluster, name string) (state, reason string) {
	t.Helper()
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved {
			reason = cond.Reason
		}
	}
	return kube.CSRState(csr), reason
}

func rejectedRules(t *testing.T, v cty.Value) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range v.AsValueSlice() {
		out[r.GetAttr("name").AsString()] = r.GetAttr("rule").AsString()
		assert.NotEmpty(t, r.GetAttr("reason").AsString())
	}
	return out
}

func stringsOf(v cty.Value) []string {
	var out []string
	for _, el := range v.AsValueSlice() {
		out = append(out, el.AsString())
	}
	return out
}

func warnings(diags hcl.Diagnostics) int {
	n := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			n++
		}
	}
	return n
}

// playKubelet plays a joining kubelet: once its client CSR is approved it
// registers the Node, with the serving CSR's addresses as the Node's, and
// asks for the serving certificate.
func playKubelet(c *kubetest.Cluster, node, clientName string, serving kubeletCSR) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for {
				csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, clientName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if kube.CSRState(csr) == kube.CSRApproved {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := registerNode(c, node, serving.ips...); err != nil {
				return err
			}
			return submitCSR(c, serving)
		}()
	}()
	return done
}

// registerNode registers a Node with an InternalIP per ip and its name as
// its Hostname, as a kubelet does.
func registerNode(c *kubetest.Cluster, node string, ips ...string) error {
	if _, err := c.CreateNode(ctx, node, nil); err != nil {
		return err
	}
	addrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}
	for _, ip := range ips {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return c.SetNodeAddresses(ctx, node, addrs...)
}

func TestCSRApproveFirstJoin(t *testing.T) {
	c := csrCluster(t)
	const node = "win-1"
	boot := kube.OpenShiftBootstrapper

	withSAN := clientCSR("client-with-san", node, boot)
	withSAN.dns = []string{node}
	wrongOrg := clientCSR("wrong-organisation", node, boot)
	wrongOrg.orgs = []string{"system:masters"}
	extraUsage := clientCSR("extra-usage", node, boot)
	extraUsage.usages = append(slices.Clone(clientUsages), "server auth")
	noClientAuth := clientCSR("missing-client-auth", node, boot)
	noClientAuth.usages = []certificatesv1.KeyUsage{"digital signature", "key encipherment"}
	wrongPrefix := clientCSR("wrong-cn-prefix", node, boot)
	wrongPrefix.cn = "system:nodes:" + node
	otherNodesName := servingCSR("other-nodes-name", "win-2", "192.168.50.5")
	otherNodesName.as = "system:node:" + node // this node asking for win-2's certificate
	// A requester in system:nodes is refused this at admission
	// (NodeRestriction); a client certificate for the node's user name
	// without that group gets it through, and wsu's rule must still catch it.
	otherNodesName.groups, otherNodesName.viaCert = nil, true
	foreignSAN := servingCSR("foreign-san", node, "192.168.50.5", "10.9.9.9")

	for _, k := range []kubeletCSR{
		clientCSR("client-ok", node, boot),
		clientCSR("wrong-requester", node, "system:serviceaccount:default:builder"),
		withSAN, wrongOrg, extraUsage, noClientAuth, wrongPrefix, otherNodesName, foreignSAN,
		clientCSR("another-node", "win-2", boot), // none of this task's business
	} {
		createCSR(t, c, k)
	}
	wantRejected := map[string]string{
		"wrong-requester":     kube.RuleClientRequester,
		"client-with-san":     kube.RuleClientSANs,
		"wrong-organisation":  kube.RuleOrganization,
		"extra-usage":         kube.RuleClientUsages,
		"missing-client-auth": kube.RuleClientUsages,
		"wrong-cn-prefix":     kube.RuleCNPrefix,
		"other-nodes-name":    kube.RuleNodeName,
		"foreign-san":         kube.RuleServingSANs,
	}

	m := CSRApprove{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"kubeconfig": cty.StringVal(c.Kubeconfig),
		"node_name":  cty.StringVal(node),
		"addresses":  cty.ListVal([]cty.Value{cty.StringVal("192.168.50.5")}),
		"hostnames":  cty.ListVal([]cty.Value{cty.StringVal(node)}),
		"timeout":    cty.NumberIntVal(60),
		"interval":   cty.NumberFloatVal(0.2),
	})
	require.Empty(t, m.Validate(modules.ValidateRequest{Config: cfg}))
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	require.NotNil(t, plan.Change)
	assert.Equal(t, modules.Run, plan.Change.Action)
	assert.Equal(t, "approve kubelet CSRs of node win-1", plan.Change.Subject)
	assert.Equal(t, len(wantRejected), warnings(plan.Diagnostics))

	kubelet := playKubelet(c, node, "client-ok", servingCSR("serving-ok", node, "192.168.50.5"))
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	require.NoError(t, <-kubelet)
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	checkResult(t, m, resp.Result)
	assert.Equal(t, []string{"client-ok", "serving-ok"}, stringsOf(resp.Result.GetAttr("approved")))
	assert.Equal(t, wantRejected, rejectedRules(t, resp.Result.GetAttr("rejected")))
	assert.Equal(t, 0, warnings(resp.Diagnostics), "the plan already warned about each")

	for _, name := range []string{"client-ok", "serving-ok"} {
		state, reason := csrState(t, c, name)
		assert.Equal(t, kube.CSRApproved, state, name)
		assert.Equal(t, kube.ApprovalReason, reason, name)
	}
	for name := range wantRejected {
		state, _ := csrState(t, c, name)
		assert.Equal(t, kube.CSRPending, state, "%s must stay pending", name)
	}
	state, _ := csrState(t, c, "another-node")
	assert.Equal(t, kube.CSRPending, state, "another node's CSR is never touched")

	// Joined: nothing left to do, and the forgeries are still reported.
	again := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
	assert.Nil(t, again.Change)
	assert.Empty(t, stringsOf(again.Result.GetAttr("approved")))
	assert.Equal(t, wantRejected, rejectedRules(t, again.Result.GetAttr("rejected")))
}

func TestCSRApproveNodeAlreadyExists(t *testing.T) {
	c := csrCluster(t)
	const node = "win-3"
	require.NoError(t, registerNode(c, node, "192.168.50.7"))
	createCSR(t, c, clientCSR("late-client", node, kube.OpenShiftBootstrapper))
	createCSR(t, c, servingCSR("serving", node, "192.168.50.7"))

	m := CSRApprove{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"kubeconfig": cty.StringVal(c.Kubeconfig),
		"node_name":  cty.StringVal(node),
		"addresses":  cty.ListVal([]cty.Value{cty.StringVal("192.168.50.7")}),
		"hostnames":  cty.ListVal([]cty.Value{cty.StringVal(node)}),
		"timeout":    cty.NumberIntVal(30),
		"interval":   cty.NumberFloatVal(0.2),
	})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	require.NotNil(t, plan.Change)
	assert.Equal(t, cty.ListVal([]cty.Value{cty.StringVal("serving")}), plan.Change.Fields[0].New)

	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	assert.Equal(t, []string{"serving"}, stringsOf(resp.Result.GetAttr("approved")))
	assert.Equal(t, map[string]string{"late-client": kube.RuleNodeExists}, rejectedRules(t, resp.Result.GetAttr("rejected")))
	state, _ := csrState(t, c, "late-client")
	assert.Equal(t, kube.CSRPending, state)
}

func TestCSRApproveTimesOutWithoutApprovingForgeries(t *testing.T) {
	c := csrCluster(t)
	const node = "win-4"
	bad := servingCSR("serving-for-metadata-ip", node, "169.254.169.254")
	createCSR(t, c, bad)

	m := CSRApprove{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"kubeconfig": cty.StringVal(c.Kubeconfig),
		"node_name":  cty.StringVal(node),
		"addresses":  cty.ListVal([]cty.Value{cty.StringVal("192.168.50.8")}),
		"client":     cty.False,
		"timeout":    cty.NumberFloatVal(1),
		"interval":   cty.NumberFloatVal(0.2),
	})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.NotNil(t, plan.Change)
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	require.True(t, resp.Diagnostics.HasErrors())
	var errs []string
	for _, d := range resp.Diagnostics {
		if d.Severity == hcl.DiagError {
			errs = append(errs, d.Summary+": "+d.Detail)
		}
	}
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], "Timed out waiting for the CSRs of node win-4")
	assert.Contains(t, errs[0], "serving CSR")
	assert.Empty(t, stringsOf(resp.Result.GetAttr("approved")))
	assert.Equal(t, map[string]string{"serving-for-metadata-ip": kube.RuleServingSANs}, rejectedRules(t, resp.Result.GetAttr("rejected")))
	state, _ := csrState(t, c, bad.name)
	assert.Equal(t, kube.CSRPending, state)
}

func TestCSRApproveValidate(t *testing.T) {
	m := CSRApprove{testClusters}
	ok := map[string]cty.Value{
		"node_name": cty.StringVal("win-1"),
		"addresses": cty.ListVal([]cty.Value{cty.StringVal("192.168.50.5")}),
	}
	with := func(k string, v cty.Value) map[string]cty.Value {
		out := map[string]cty.Value{}
		for kk, vv := range ok {
			out[kk] = vv
		}
		out[k] = v
		return out
	}
	tests := []struct {
		name  string
		attrs map[string]cty.Value
		want  []string
	}{
		{"ok", ok, nil},
		{"bad node name", with("node_name", cty.StringVal("Win_1")), []string{"Invalid node name"}},
		{"no addresses for serving", with("addresses", cty.ListValEmpty(cty.String)), []string{"No addresses"}},
		{"no addresses without serving is fine", map[string]cty.Value{"node_name": cty.StringVal("w"), "serving": cty.False}, nil},
		{"only empty names", with("addresses", cty.ListVal([]cty.Value{cty.StringVal(""), cty.NullVal(cty.String)})), []string{"No addresses"}},
		{"empty FQDN skipped", with("hostnames", cty.ListVal([]cty.Value{cty.StringVal("win-1"), cty.StringVal("")})), nil},
		{"nothing expected", with("client", cty.False), nil},
		{"neither", map[string]cty.Value{"node_name": cty.StringVal("w"), "client": cty.False, "serving": cty.False}, []string{"Nothing to approve"}},
		{"no requesters", with("client_requesters", cty.ListValEmpty(cty.String)), []string{"No client requesters"}},
		{"node identity as requester", with("client_requesters", cty.ListVal([]cty.Value{cty.StringVal("system:node:win-1")})), []string{"Node identity as client requester"}},
		{"negative timeout", with("timeout", cty.NumberIntVal(-1)), []string{"Invalid timeout"}},
		{"zero interval", with("interval", cty.NumberIntVal(0)), []string{"Invalid interval"}},
		{"unknown lists", with("addresses", cty.UnknownVal(cty.List(cty.String))), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, diagSummaries(m.Validate(modules.ValidateRequest{Config: cfgFor(t, m, tt.attrs)})))
		})
	}
}

// TestCSRApproveRefusesClusterNames: a serving CSR naming the API
// server's in-cluster name, the kubernetes Service's address or the API
// server's own address is refused outright, even when the instance's
// expectation and the Node's own addresses (both of which a node can
// influence) list them; one naming an address the instance was not given
// is refused; the good one is approved. The module runs as a user holding
// only the shipped roles, which must let it read the cluster's addresses.
func TestCSRApproveRefusesClusterNames(t *testing.T) {
	c := csrCluster(t)
	grant(t, c, "wsu-csr")
	userKC, err := c.User("wsu-csr")
	require.NoError(t, err)
	const node, nodeIP, otherIP = "win-6", "192.168.50.9", "192.168.50.99"

	svc, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	serviceIP := svc.Spec.ClusterIP
	slice, err := c.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err, "the API server publishes its own EndpointSlice")
	require.NotEmpty(t, slice.Endpoints)
	apiIP := slice.Endpoints[0].Addresses[0]
	inServiceNet := "10.0.0.77" // kubetest.ServiceSubnet, passed as join passes k8s_cluster_network's
	require.NotEqual(t, serviceIP, inServiceNet)

	require.NoError(t, registerNode(c, node, nodeIP, serviceIP, apiIP, inServiceNet, otherIP))
	n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.SetNodeAddresses(ctx, node, append(n.Status.Addresses,
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "kubernetes.default.svc"})...))

	svcName := servingCSR("svc-name", node, nodeIP)
	svcName.dns = append(svcName.dns, "kubernetes.default.svc")
	for _, k := range []kubeletCSR{
		svcName,
		servingCSR("service-ip", node, nodeIP, serviceIP),
		servingCSR("apiserver-ip", node, apiIP),
		servingCSR("service-network", node, inServiceNet),
		servingCSR("other-address", node, otherIP),
	} {
		createCSR(t, c, k)
	}
	wantRejected := map[string]string{
		"svc-name":        kube.RuleServingClusterNames,
		"service-ip":      kube.RuleServingClusterNames,
		"apiserver-ip":    kube.RuleServingClusterNames,
		"service-network": kube.RuleServingClusterNames,
		"other-address":   kube.RuleServingSANs,
	}
	list := func(ss ...string) cty.Value {
		var vals []cty.Value
		for _, s := range ss {
			vals = append(vals, cty.StringVal(s))
		}
		return cty.ListVal(vals)
	}
	m := CSRApprove{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"kubeconfig":    cty.StringVal(userKC),
		"node_name":     cty.StringVal(node),
		"addresses":     list(nodeIP, serviceIP, apiIP, inServiceNet),
		"hostnames":     list(node, "kubernetes.default.svc"),
		"service_cidrs": list(kubetest.ServiceSubnet),
		"client":        cty.False,
		"timeout":       cty.NumberIntVal(30),
		"interval":      cty.NumberFloatVal(0.2),
	})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	var warned []string
	for _, d := range plan.Diagnostics {
		warned = append(warned, d.Detail)
	}
	assert.Contains(t, strings.Join(warned, "\n"), `DNS name "kubernetes.default.svc" is the API server's in-cluster name`, "the warning says why")

	createCSR(t, c, servingCSR("serving-ok", node, nodeIP))
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	assert.Equal(t, []string{"serving-ok"}, stringsOf(resp.Result.GetAttr("approved")))
	assert.Equal(t, wantRejected, rejectedRules(t, resp.Result.GetAttr("rejected")))
	var reasons []string
	for _, r := range resp.Result.GetAttr("rejected").AsValueSlice() {
		reasons = append(reasons, r.GetAttr("reason").AsString())
	}
	assert.Contains(t, strings.Join(reasons, "\n"), "is in the service network 10.0.0.0/24", "the refusal says why")
	for name := range wantRejected {
		state, _ := csrState(t, c, name)
		assert.Equal(t, kube.CSRPending, state, "%s must stay pending", name)
	}
}

// A look woken by the node's CSR is not answered with a list another
// host's look took before the CSR came: with a minute between timed looks,
// the join's approval must come from the wake, not the next minute.
func TestCSRApproveWokenLookListsAgain(t *testing.T) {
	c := csrCluster(t)
	const node = "win-woken"
	m := CSRApprove{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"kubeconfig": cty.StringVal(c.Kubeconfig),
		"node_name":  cty.StringVal(node),
		"addresses":  cty.ListVal([]cty.Value{cty.StringVal("192.168.50.7")}),
		"hostnames":  cty.ListVal([]cty.Value{cty.StringVal(node)}),
		"timeout":    cty.NumberIntVal(120),
		"interval":   cty.NumberIntVal(60),
	})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	cl, _, diags := m.client(cfg)
	require.False(t, diags.HasErrors(), "%v", diags)

	bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	applied := make(chan modules.ApplyResponse, 1)
	go func() { applied <- m.Apply(bounded, modules.ApplyRequest{Config: cfg, Change: plan.Change}) }()
	time.Sleep(300 * time.Millisecond) // the apply's first look: no CSR yet

	// Another host's look lists the CSRs now, before this node's CSR
	// exists; the shared list keeps that list for a second.
	_, err := cl.CSRs.NodeCSRs(ctx, kube.Expectation{NodeName: "win-other"}, time.Now())
	require.NoError(t, err)
	createCSR(t, c, clientCSR("client-woken", node, kube.OpenShiftBootstrapper))
	kubelet := playKubelet(c, node, "client-woken", servingCSR("serving-woken", node, "192.168.50.7"))

	resp := <-applied
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	require.NoError(t, <-kubelet) // its client CSR approved, it asked for the serving one
	assert.Equal(t, []string{"client-woken", "serving-woken"}, stringsOf(resp.Result.GetAttr("approved")))
}
