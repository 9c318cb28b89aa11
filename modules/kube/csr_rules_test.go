package kube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/test/kubetest"
)

// ruleCase is one approval rule broken by one CSR, on a real API server.
type ruleCase struct {
	name string
	rule string
	// setup makes what the cluster holds before the CSR: a Node, other
	// CSRs. ip is the instance's address.
	setup func(t *testing.T, c *kubetest.Cluster, node, ip string)
	// bad is the CSR that breaks rule and nothing else.
	bad func(node, ip string) kubeletCSR
	// attrs changes the task's arguments; runStart is the run's start
	// relative to now (default: the test process's start).
	attrs    func(node, ip string) map[string]cty.Value
	runStart time.Duration
	// approved is what the task approves besides (default nothing).
	approved []string
}

func keyOf(t *testing.T, gen func() (crypto.Signer, error)) crypto.Signer {
	t.Helper()
	k, err := gen()
	require.NoError(t, err)
	return k
}

func registered(t *testing.T, c *kubetest.Cluster, node, ip string) {
	t.Helper()
	require.NoError(t, registerNode(c, node, ip))
}

func withKey(k kubeletCSR, key crypto.Signer) kubeletCSR {
	k.key = key
	return k
}

// TestCSRApproveEachRule holds k8s_csr_approve to each approval rule on a
// real API server: the CSR of each case breaks that rule only, and must be
// refused for it, reported, and left pending.
func TestCSRApproveEachRule(t *testing.T) {
	c := csrCluster(t)
	boot := kube.OpenShiftBootstrapper
	rsa1024 := keyOf(t, func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 1024) })
	p224 := keyOf(t, func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P224(), rand.Reader) })
	ed := keyOf(t, func() (crypto.Signer, error) { _, k, err := ed25519.GenerateKey(rand.Reader); return k, err })

	cases := []ruleCase{
		{name: "key RSA 1024", rule: kube.RuleKey, bad: func(node, _ string) kubeletCSR {
			return withKey(clientCSR("bad", node, boot), rsa1024)
		}},
		{name: "key ECDSA P-224", rule: kube.RuleKey, setup: registered, bad: func(node, ip string) kubeletCSR {
			return withKey(servingCSR("bad", node, ip), p224)
		}},
		{name: "key Ed25519", rule: kube.RuleKey, bad: func(node, _ string) kubeletCSR {
			return withKey(clientCSR("bad", node, boot), ed)
		}},
		{name: "signer", rule: kube.RuleSigner, bad: func(node, _ string) kubeletCSR {
			k := clientCSR("bad", node, boot)
			k.signer = certificatesv1.KubeAPIServerClientSignerName
			return k
		}},
		{name: "cn-prefix", rule: kube.RuleCNPrefix, bad: func(node, _ string) kubeletCSR {
			k := clientCSR("bad", node, boot)
			k.cn = "system:nodes:" + node
			return k
		}},
		{name: "node-name", rule: kube.RuleNodeName, setup: registered, bad: func(node, ip string) kubeletCSR {
			// The node asks for another node's serving certificate; a
			// certificate without system:nodes passes NodeRestriction.
			k := servingCSR("bad", node+"-other", ip)
			k.as, k.groups, k.viaCert = "system:node:"+node, nil, true
			return k
		}},
		{name: "organization", rule: kube.RuleOrganization, bad: func(node, _ string) kubeletCSR {
			k := clientCSR("bad", node, boot)
			k.orgs = []string{"system:masters"}
			return k
		}},
		{name: "not-before (not_before)", rule: kube.RuleNotBefore, bad: func(node, _ string) kubeletCSR {
			return clientCSR("bad", node, boot)
		}, attrs: func(string, string) map[string]cty.Value {
			return map[string]cty.Value{"not_before": cty.StringVal(time.Now().Add(2 * kube.CSRClockSkew).UTC().Format(time.RFC3339))}
		}},
		{name: "not-before (run start)", rule: kube.RuleNotBefore, runStart: 2 * kube.CSRClockSkew, bad: func(node, _ string) kubeletCSR {
			return clientCSR("bad", node, boot)
		}},
		{name: "client-no-sans", rule: kube.RuleClientSANs, bad: func(node, _ string) kubeletCSR {
			k := clientCSR("bad", node, boot)
			k.dns = []string{node}
			return k
		}},
		{name: "client-usages", rule: kube.RuleClientUsages, bad: func(node, _ string) kubeletCSR {
			k := clientCSR("bad", node, boot)
			k.usages = append(slices.Clone(clientUsages), "server auth")
			return k
		}},
		{name: "client-requester", rule: kube.RuleClientRequester, bad: func(node, _ string) kubeletCSR {
			return clientCSR("bad", node, "system:serviceaccount:default:builder")
		}},
		{name: "node-exists", rule: kube.RuleNodeExists, setup: registered, bad: func(node, _ string) kubeletCSR {
			return clientCSR("bad", node, boot)
		}},
		{name: "client-once", rule: kube.RuleClientOnce, approved: []string{"first"},
			setup: func(t *testing.T, c *kubetest.Cluster, node, _ string) {
				createCSR(t, c, clientCSR(node+"-first", node, boot))
				time.Sleep(1100 * time.Millisecond) // creationTimestamp has whole seconds
			},
			bad: func(node, _ string) kubeletCSR { return clientCSR("bad", node, boot) }},
		{name: "node-registered", rule: kube.RuleNodeRegistered, bad: func(node, ip string) kubeletCSR {
			return servingCSR("bad", node, ip)
		}},
		{name: "serving-requester", rule: kube.RuleServingRequester, setup: registered, bad: func(node, ip string) kubeletCSR {
			k := servingCSR("bad", node, ip)
			k.as, k.groups = boot, nil
			return k
		}},
		{name: "serving-groups", rule: kube.RuleServingGroups, setup: registered, bad: func(node, ip string) kubeletCSR {
			k := servingCSR("bad", node, ip)
			k.groups, k.viaCert = []string{"system:authenticated"}, true
			return k
		}},
		{name: "serving-usages", rule: kube.RuleServingUsages, setup: registered, bad: func(node, ip string) kubeletCSR {
			k := servingCSR("bad", node, ip)
			k.usages = append(slices.Clone(servingUsages), "client auth")
			return k
		}},
		{name: "serving-sans", rule: kube.RuleServingSANs,
			setup: func(t *testing.T, c *kubetest.Cluster, node, ip string) {
				// The Node reports the foreign address too: only the
				// instance's addresses disagree.
				require.NoError(t, registerNode(c, node, ip, "10.9.9.9"))
			},
			bad: func(node, ip string) kubeletCSR { return servingCSR("bad", node, ip, "10.9.9.9") }},
		{name: "serving-node-sans (a name taken by another host)", rule: kube.RuleServingNodeSANs,
			setup: func(t *testing.T, c *kubetest.Cluster, node, _ string) {
				// The name is registered by a host at another address.
				require.NoError(t, registerNode(c, node, "10.9.9.9"))
			},
			bad: func(node, ip string) kubeletCSR { return servingCSR("bad", node, ip) }},
	}
	// The API server itself refuses a request that does not parse or whose
	// signature does not verify, so rule request cannot be broken there.
	t.Run("request", func(t *testing.T) {
		k := clientCSR("rule-request-bad", "rule-request", boot)
		k.tamper = true
		err := submitCSR(c, k)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "verification failure")
	})
	covered := map[string]bool{kube.RuleRequest: true}
	for i, tc := range cases {
		covered[tc.rule] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node, ip := fmt.Sprintf("rule-%d", i), fmt.Sprintf("10.3.0.%d", i+1)
			runRuleCase(t, c, tc, node, ip)
		})
	}
	for _, r := range allRules {
		assert.True(t, covered[r], "rule %s has no case", r)
	}
}

var allRules = []string{
	kube.RuleRequest, kube.RuleKey, kube.RuleSigner, kube.RuleCNPrefix, kube.RuleNodeName, kube.RuleOrganization,
	kube.RuleNotBefore, kube.RuleClientSANs, kube.RuleClientUsages, kube.RuleClientRequester, kube.RuleNodeExists,
	kube.RuleClientOnce, kube.RuleNodeRegistered, kube.RuleServingRequester, kube.RuleServingGroups,
	kube.RuleServingUsages, kube.RuleServingSANs, kube.RuleServingNodeSANs,
}

func runRuleCase(t *testing.T, c *kubetest.Cluster, tc ruleCase, node, ip string) {
	if tc.setup != nil {
		tc.setup(t, c, node, ip)
	}
	bad := tc.bad(node, ip)
	bad.name = node + "-" + bad.name
	createCSR(t, c, bad)
	serving := bad.signer == certificatesv1.KubeletServingSignerName
	attrs := map[string]cty.Value{
		"kubeconfig": cty.StringVal(c.Kubeconfig),
		"node_name":  cty.StringVal(node),
		"addresses":  strs(ip),
		"hostnames":  strs(node),
		"client":     cty.BoolVal(!serving),
		"serving":    cty.BoolVal(serving),
		"timeout":    cty.NumberFloatVal(1.5),
		"interval":   cty.NumberFloatVal(0.2),
	}
	if tc.attrs != nil {
		for k, v := range tc.attrs(node, ip) {
			attrs[k] = v
		}
	}
	m := CSRApprove{testClusters}
	if tc.runStart != 0 {
		m = CSRApprove{Clusters{Cache: kube.NewCache(kube.Defaults{Start: time.Now().Add(tc.runStart)})}}
	}
	cfg := cfgFor(t, m, attrs)
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	// With nothing left to do (the client CSR of an existing Node), the
	// plan is the task's whole answer.
	resp := modules.ApplyResponse{Result: plan.Result}
	if plan.Change != nil {
		resp = m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: plan.Change})
	}

	var want []string
	for _, a := range tc.approved {
		want = append(want, node+"-"+a)
	}
	assert.Equal(t, want, stringsOf(resp.Result.GetAttr("approved")))
	rejected := rejectedRules(t, resp.Result.GetAttr("rejected"))
	assert.Equal(t, map[string]string{bad.name: tc.rule}, rejected)
	if len(want) == 0 && plan.Change != nil {
		require.True(t, resp.Diagnostics.HasErrors(), "nothing approvable: the task times out")
	} else {
		require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	}
	// The reason is in the output: the plan's warning names the rule.
	assert.True(t, slices.ContainsFunc(plan.Diagnostics, func(d *hcl.Diagnostic) bool {
		return d.Severity == hcl.DiagWarning && d.Summary == fmt.Sprintf("CSR %s for node %s not approved", bad.name, node) &&
			strings.Contains(d.Detail, "rule "+tc.rule+": ")
	}), "a warning names rule %s: %v", tc.rule, plan.Diagnostics)
	state, _ := csrState(t, c, bad.name)
	assert.Equal(t, kube.CSRPending, state, "left pending")
}

// TestCSRRenewalRules runs the renewal semantics of the same rules, as the
// controller will call them, on a real API server: the kubelet renews its
// client certificate as the node itself.
func TestCSRRenewalRules(t *testing.T) {
	c := csrCluster(t)
	const node = "renew-1"
	require.NoError(t, registerNode(c, node, "10.4.0.1"))
	renew := clientCSR("renewal", node, "system:node:"+node)
	renew.groups, renew.usages = nodeGroups, []certificatesv1.KeyUsage{"digital signature", "client auth"}
	createCSR(t, c, renew)
	orphan := clientCSR("orphan-renewal", "renew-2", "system:node:renew-2")
	orphan.groups = nodeGroups
	createCSR(t, c, orphan)
	boot := clientCSR("bootstrap-renewal", node, kube.OpenShiftBootstrapper)
	time.Sleep(1100 * time.Millisecond)
	createCSR(t, c, boot)

	want := kube.Expectation{NodeName: node, Addresses: []string{"10.4.0.1"}, Renewal: true, NotBefore: time.Now().Add(-time.Minute)}
	s, err := kube.NodeCSRs(ctx, c.Client, want)
	require.NoError(t, err)
	verdicts := map[string]string{}
	for _, nc := range s.CSRs {
		verdicts[nc.Name] = ruleOf(nc.Err)
	}
	assert.Equal(t, map[string]string{"renewal": "", "bootstrap-renewal": kube.RuleClientRequester}, verdicts)
	require.NoError(t, kube.ApproveCSR(ctx, c.Client, "renewal", want))
	err = kube.ApproveCSR(ctx, c.Client, "bootstrap-renewal", want)
	assert.Equal(t, kube.RuleClientRequester, ruleOf(err), "%v", err)

	// A second renewal in the window is refused: one at a time.
	again := renew
	again.name = "renewal-again"
	createCSR(t, c, again)
	err = kube.ApproveCSR(ctx, c.Client, "renewal-again", want)
	assert.Equal(t, kube.RuleClientOnce, ruleOf(err), "%v", err)

	// No Node, nothing to renew.
	err = kube.ApproveCSR(ctx, c.Client, "orphan-renewal", kube.Expectation{NodeName: "renew-2", Renewal: true, NotBefore: want.NotBefore})
	assert.Equal(t, kube.RuleNodeRegistered, ruleOf(err), "%v", err)
	for name, wantState := range map[string]string{"renewal": kube.CSRApproved, "bootstrap-renewal": kube.CSRPending,
		"renewal-again": kube.CSRPending, "orphan-renewal": kube.CSRPending} {
		state, _ := csrState(t, c, name)
		assert.Equal(t, wantState, state, name)
	}
}

func ruleOf(err error) string {
	var re *kube.RuleError
	if errors.As(err, &re) {
		return re.Rule
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}
