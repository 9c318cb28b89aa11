package kube

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// csrSpec describes a CSR as a kubelet (or an attacker) would send it.
type csrSpec struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []string
	emails []string
	uris   []string
	signer string
	usages []certificatesv1.KeyUsage
	user   string
	groups []string
	// key signs the request (default testKey); created is its
	// creationTimestamp (default a minute after testStart).
	key     crypto.Signer
	created time.Time
}

var testKey = func() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}()

func rsaKey(t testing.TB, bits int) crypto.Signer {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	require.NoError(t, err)
	return k
}

func ecKey(t testing.TB, c elliptic.Curve) crypto.Signer {
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	require.NoError(t, err)
	return k
}

func edKey(t testing.TB) crypto.Signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return k
}

// testStart is when the join of the tests began.
var testStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// requestPEM makes a real PKCS#10 request with crypto/x509.
func requestPEM(t testing.TB, s csrSpec) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{
		Subject:        pkix.Name{CommonName: s.cn, Organization: s.orgs},
		DNSNames:       s.dns,
		EmailAddresses: s.emails,
	}
	for _, ip := range s.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range s.uris {
		pu, err := url.Parse(u)
		require.NoError(t, err)
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	var key crypto.Signer = testKey
	if s.key != nil {
		key = s.key
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func makeCSR(t testing.TB, name string, s csrSpec) *certificatesv1.CertificateSigningRequest {
	created := s.created
	if created.IsZero() {
		created = testStart.Add(time.Minute)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    requestPEM(t, s),
			SignerName: s.signer,
			Usages:     s.usages,
			Username:   s.user,
			Groups:     s.groups,
		},
	}
}

const testNode = "win-1"

var (
	testExpect = Expectation{
		NodeName:  "WIN-1", // the kubelet lower-cases; so does Validate
		Addresses: []string{"10.0.0.5", "fd00::5", "win-1.internal.example.com"},
		Hostnames: []string{"win-1", "WIN-1.example.com."},
		NotBefore: testStart,
		Cluster:   &testCluster,
	}
	// testCluster: a service network, the kubernetes Service's IP in it,
	// and the API server's endpoints outside it.
	testCluster = ClusterAddresses{
		ServiceNetworks: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")},
		APIServer:       []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("192.168.1.11")},
	}
	validClient = csrSpec{
		cn: "system:node:" + testNode, orgs: []string{"system:nodes"},
		signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
		usages: []certificatesv1.KeyUsage{"digital signature", "key encipherment", "client auth"},
		user:   OpenShiftBootstrapper,
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator", "system:authenticated"},
	}
	validServing = csrSpec{
		cn: "system:node:" + testNode, orgs: []string{"system:nodes"},
		dns: []string{"win-1", "win-1.example.com", "win-1.internal.example.com"}, ips: []string{"10.0.0.5", "fd00:0::5"},
		signer: certificatesv1.KubeletServingSignerName,
		usages: []certificatesv1.KeyUsage{"digital signature", "key encipherment", "server auth"},
		user:   "system:node:" + testNode,
		groups: []string{"system:nodes", "system:authenticated"},
	}
	// validRenewal is the kubelet renewing its client certificate with
	// the one it has.
	validRenewal = csrSpec{
		cn: "system:node:" + testNode, orgs: []string{"system:nodes"},
		signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
		usages: []certificatesv1.KeyUsage{"digital signature", "client auth"},
		user:   "system:node:" + testNode,
		groups: []string{"system:nodes", "system:authenticated"},
	}
)

func renewal(e *Expectation) { e.Renewal = true }

func noNode() *corev1.Node { return nil }

// testNodeObj is the Node the kubelet of the test instance registered.
func testNodeObj() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
			{Type: corev1.NodeInternalIP, Address: "fd00::5"},
			{Type: corev1.NodeHostName, Address: "win-1"},
			{Type: corev1.NodeInternalDNS, Address: "win-1.example.com"},
			{Type: corev1.NodeExternalDNS, Address: "WIN-1.internal.example.com."},
		}},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		base   csrSpec
		edit   func(*csrSpec)
		expect func(*Expectation)
		// node replaces the registered Node (default: none for a client
		// CSR, testNodeObj for a serving one).
		node     func() *corev1.Node
		wantKind string
		wantRule string // "" means approvable
		// wantDetail is part of the reason given.
		wantDetail string
	}{
		{name: "valid client", base: validClient, wantKind: CSRClient},
		{name: "valid client without key encipherment", base: validClient, edit: func(s *csrSpec) {
			s.usages = []certificatesv1.KeyUsage{"client auth", "digital signature"}
		}, wantKind: CSRClient},
		{name: "valid kubeadm client", base: validClient, edit: func(s *csrSpec) { s.user = "system:bootstrap:abcdef" },
			expect: func(e *Expectation) { e.ClientRequesters = []string{"system:bootstrap:abcdef"} }, wantKind: CSRClient},
		{name: "valid serving", base: validServing, wantKind: CSRServing},
		{name: "valid serving, IP only, no key encipherment", base: validServing, edit: func(s *csrSpec) {
			s.dns = nil
			s.ips = []string{"10.0.0.5"}
			s.usages = []certificatesv1.KeyUsage{"server auth", "digital signature"}
		}, wantKind: CSRServing},

		// Shared rules.
		{name: "other signer", base: validClient, edit: func(s *csrSpec) { s.signer = "kubernetes.io/kube-apiserver-client" }, wantRule: RuleSigner},
		{name: "wrong CN prefix", base: validClient, edit: func(s *csrSpec) { s.cn = "system:nodes:" + testNode }, wantKind: CSRClient, wantRule: RuleCNPrefix},
		{name: "bare CN", base: validServing, edit: func(s *csrSpec) { s.cn = testNode }, wantKind: CSRServing, wantRule: RuleCNPrefix},
		{name: "another node's name (client)", base: validClient, edit: func(s *csrSpec) { s.cn = "system:node:master-0" }, wantKind: CSRClient, wantRule: RuleNodeName},
		{name: "another node's name (serving)", base: validServing, edit: func(s *csrSpec) {
			s.cn, s.user = "system:node:win-10", "system:node:win-10"
		}, wantKind: CSRServing, wantRule: RuleNodeName},
		{name: "no node expected", base: validClient, expect: func(e *Expectation) { e.NodeName = "" }, wantKind: CSRClient, wantRule: RuleNodeName},
		{name: "wrong organisation", base: validClient, edit: func(s *csrSpec) { s.orgs = []string{"system:masters"} }, wantKind: CSRClient, wantRule: RuleOrganization},
		{name: "extra organisation", base: validServing, edit: func(s *csrSpec) { s.orgs = []string{"system:nodes", "system:masters"} }, wantKind: CSRServing, wantRule: RuleOrganization},
		{name: "no organisation", base: validClient, edit: func(s *csrSpec) { s.orgs = nil }, wantKind: CSRClient, wantRule: RuleOrganization},

		// Client rules.
		{name: "client CSR with a DNS SAN", base: validClient, edit: func(s *csrSpec) { s.dns = []string{"win-1"} }, wantKind: CSRClient, wantRule: RuleClientSANs},
		{name: "client CSR with an IP SAN", base: validClient, edit: func(s *csrSpec) { s.ips = []string{"10.0.0.5"} }, wantKind: CSRClient, wantRule: RuleClientSANs},
		{name: "client CSR with an email SAN", base: validClient, edit: func(s *csrSpec) { s.emails = []string{"a@b.c"} }, wantKind: CSRClient, wantRule: RuleClientSANs},
		{name: "client CSR with a URI SAN", base: validClient, edit: func(s *csrSpec) { s.uris = []string{"spiffe://x/y"} }, wantKind: CSRClient, wantRule: RuleClientSANs},
		{name: "client extra usage", base: validClient, edit: func(s *csrSpec) {
			s.usages = append(s.usages, "server auth")
		}, wantKind: CSRClient, wantRule: RuleClientUsages},
		{name: "client missing client auth", base: validClient, edit: func(s *csrSpec) {
			s.usages = []certificatesv1.KeyUsage{"digital signature", "key encipherment"}
		}, wantKind: CSRClient, wantRule: RuleClientUsages},
		{name: "client without digital signature", base: validClient, edit: func(s *csrSpec) {
			s.usages = []certificatesv1.KeyUsage{"key encipherment", "client auth"}
		}, wantKind: CSRClient, wantRule: RuleClientUsages},
		{name: "client repeated usage", base: validClient, edit: func(s *csrSpec) {
			s.usages = []certificatesv1.KeyUsage{"digital signature", "client auth", "client auth"}
		}, wantKind: CSRClient, wantRule: RuleClientUsages},
		{name: "client wrong requester", base: validClient, edit: func(s *csrSpec) { s.user = "system:serviceaccount:default:builder" }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "client requested by the node itself", base: validClient, edit: func(s *csrSpec) { s.user = "system:node:" + testNode }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "kubeadm requester not configured", base: validClient, edit: func(s *csrSpec) { s.user = "system:bootstrap:abcdef" }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "kubeadm other token", base: validClient, edit: func(s *csrSpec) { s.user = "system:bootstrap:zzzzzz" },
			expect: func(e *Expectation) { e.ClientRequesters = []string{"system:bootstrap:abcdef"} }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "Node already exists", base: validClient, node: testNodeObj, wantKind: CSRClient, wantRule: RuleNodeExists},
		{name: "second client CSR of the join", base: validClient, expect: func(e *Expectation) { e.ClientCSR = "csr-first" }, wantKind: CSRClient, wantRule: RuleClientOnce},
		{name: "the join's own client CSR", base: validClient, expect: func(e *Expectation) { e.ClientCSR = "csr-x" }, wantKind: CSRClient},

		// Renewals.
		{name: "valid renewal", base: validRenewal, expect: renewal, node: testNodeObj, wantKind: CSRClient},
		{name: "renewal without the Node", base: validRenewal, expect: renewal, node: noNode, wantKind: CSRClient, wantRule: RuleNodeRegistered},
		{name: "renewal by the bootstrap identity", base: validRenewal, expect: renewal, node: testNodeObj,
			edit: func(s *csrSpec) { s.user = OpenShiftBootstrapper }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "renewal by another node", base: validRenewal, expect: renewal, node: testNodeObj,
			edit: func(s *csrSpec) { s.user = "system:node:win-2" }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "renewal outside system:nodes", base: validRenewal, expect: renewal, node: testNodeObj,
			edit: func(s *csrSpec) { s.groups = []string{"system:authenticated"} }, wantKind: CSRClient, wantRule: RuleClientRequester},
		{name: "second renewal in the window", base: validRenewal, node: testNodeObj, expect: func(e *Expectation) {
			renewal(e)
			e.ClientCSR = "csr-first"
		}, wantKind: CSRClient, wantRule: RuleClientOnce},

		// Key policy.
		{name: "RSA 2048", base: validClient, edit: func(s *csrSpec) { s.key = rsaKey(t, 2048) }, wantKind: CSRClient},
		{name: "ECDSA P-384", base: validServing, edit: func(s *csrSpec) { s.key = ecKey(t, elliptic.P384()) }, wantKind: CSRServing},
		{name: "RSA 1024", base: validClient, edit: func(s *csrSpec) { s.key = rsaKey(t, 1024) }, wantKind: CSRClient, wantRule: RuleKey, wantDetail: "RSA key of 1024 bits"},
		{name: "RSA 2047", base: validServing, edit: func(s *csrSpec) { s.key = rsaKey(t, 2047) }, wantKind: CSRServing, wantRule: RuleKey, wantDetail: "2047 bits"},
		{name: "ECDSA P-224", base: validClient, edit: func(s *csrSpec) { s.key = ecKey(t, elliptic.P224()) }, wantKind: CSRClient, wantRule: RuleKey, wantDetail: "curve P-224"},
		{name: "ECDSA P-521", base: validServing, edit: func(s *csrSpec) { s.key = ecKey(t, elliptic.P521()) }, wantKind: CSRServing, wantRule: RuleKey, wantDetail: "curve P-521"},
		{name: "Ed25519", base: validClient, edit: func(s *csrSpec) { s.key = edKey(t) }, wantKind: CSRClient, wantRule: RuleKey, wantDetail: "Ed25519 key"},

		// Time window.
		{name: "created before the join", base: validClient, edit: func(s *csrSpec) { s.created = testStart.Add(-CSRClockSkew - time.Second) },
			wantKind: CSRClient, wantRule: RuleNotBefore, wantDetail: "before this join began"},
		{name: "created within the clock skew", base: validServing, edit: func(s *csrSpec) { s.created = testStart.Add(-CSRClockSkew + time.Second) }, wantKind: CSRServing},
		{name: "no window refuses even a day-old CSR", base: validClient, edit: func(s *csrSpec) { s.created = testStart.Add(-24 * time.Hour) },
			expect: func(e *Expectation) { e.NotBefore = time.Time{} }, wantKind: CSRClient, wantRule: RuleNotBefore, wantDetail: "no join window"},
		{name: "no window refuses a fresh CSR too", base: validServing,
			expect: func(e *Expectation) { e.NotBefore = time.Time{} }, wantKind: CSRServing, wantRule: RuleNotBefore, wantDetail: "no join window"},

		// Serving rules.
		{name: "serving without the Node", base: validServing, node: noNode, wantKind: CSRServing, wantRule: RuleNodeRegistered},
		{name: "serving IP not the Node's", base: validServing, node: func() *corev1.Node {
			n := testNodeObj()
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.99"}, {Type: corev1.NodeHostName, Address: testNode}}
			return n
		}, wantKind: CSRServing, wantRule: RuleServingNodeSANs, wantDetail: "IP address 10.0.0.5 is not one of Node \"win-1\"'s addresses"},
		{name: "serving DNS not the Node's", base: validServing, node: func() *corev1.Node {
			n := testNodeObj()
			n.Status.Addresses = n.Status.Addresses[:2]
			return n
		}, wantKind: CSRServing, wantRule: RuleServingNodeSANs, wantDetail: "DNS name"},
		{name: "serving Node with no addresses", base: validServing, node: func() *corev1.Node {
			n := testNodeObj()
			n.Status.Addresses = nil
			return n
		}, wantKind: CSRServing, wantRule: RuleServingNodeSANs, wantDetail: "none given"},
		{name: "serving IP only in the Node's InternalDNS is not an IP", base: validServing, node: func() *corev1.Node {
			n := testNodeObj()
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalDNS, Address: "10.0.0.5"}, {Type: corev1.NodeInternalIP, Address: "fd00::5"}}
			return n
		}, wantKind: CSRServing, wantRule: RuleServingNodeSANs},
		{name: "serving wrong requester", base: validServing, edit: func(s *csrSpec) { s.user = OpenShiftBootstrapper }, wantKind: CSRServing, wantRule: RuleServingRequester},
		{name: "serving requested by another node", base: validServing, edit: func(s *csrSpec) { s.user = "system:node:win-2" }, wantKind: CSRServing, wantRule: RuleServingRequester},
		{name: "serving missing system:nodes", base: validServing, edit: func(s *csrSpec) { s.groups = []string{"system:authenticated"} }, wantKind: CSRServing, wantRule: RuleServingGroups},
		{name: "serving missing system:authenticated", base: validServing, edit: func(s *csrSpec) { s.groups = []string{"system:nodes"} }, wantKind: CSRServing, wantRule: RuleServingGroups},
		{name: "serving missing server auth", base: validServing, edit: func(s *csrSpec) {
			s.usages = []certificatesv1.KeyUsage{"digital signature", "key encipherment"}
		}, wantKind: CSRServing, wantRule: RuleServingUsages},
		{name: "serving extra usage", base: validServing, edit: func(s *csrSpec) { s.usages = append(s.usages, "client auth") }, wantKind: CSRServing, wantRule: RuleServingUsages},
		{name: "serving repeated usage", base: validServing, edit: func(s *csrSpec) { s.usages = append(s.usages, "server auth") }, wantKind: CSRServing, wantRule: RuleServingUsages},
		{name: "serving IP not the host's", base: validServing, edit: func(s *csrSpec) { s.ips = append(s.ips, "10.0.0.6") }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving DNS not the host's", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "win-2.example.com") }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving DNS suffix trick", base: validServing, edit: func(s *csrSpec) { s.dns = []string{"win-1.example.com.evil.com"} }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving email SAN", base: validServing, edit: func(s *csrSpec) { s.emails = []string{"a@b.c"} }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving URI SAN", base: validServing, edit: func(s *csrSpec) { s.uris = []string{"https://win-1"} }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving without any SAN", base: validServing, edit: func(s *csrSpec) { s.dns, s.ips = nil, nil }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving with no addresses expected", base: validServing, expect: func(e *Expectation) { e.Addresses = nil }, wantKind: CSRServing, wantRule: RuleServingSANs},
		// The cluster's own names and addresses are refused outright,
		// even when the instance's expectation (what the admin gave, or a
		// host's claim that reached it) lists them.
		{name: "serving kubernetes", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "kubernetes") },
			expect: allowSANs("kubernetes"), wantKind: CSRServing, wantRule: RuleServingClusterNames, wantDetail: `DNS name "kubernetes" is the API server's in-cluster name`},
		{name: "serving kubernetes.default", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "kubernetes.default") },
			expect: allowSANs("kubernetes.default"), wantKind: CSRServing, wantRule: RuleServingClusterNames},
		{name: "serving kubernetes.default.svc", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "kubernetes.default.svc") },
			expect: allowSANs("kubernetes.default.svc"), wantKind: CSRServing, wantRule: RuleServingClusterNames},
		{name: "serving kubernetes.default.svc.cluster.local, upper case, trailing dot", base: validServing,
			edit:   func(s *csrSpec) { s.dns = append(s.dns, "Kubernetes.Default.SVC.cluster.local.") },
			expect: allowSANs("kubernetes.default.svc.cluster.local"), wantKind: CSRServing, wantRule: RuleServingClusterNames, wantDetail: "kubernetes.default.svc.<cluster domain>"},
		{name: "serving kubernetes.default.svc.other-domain", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "kubernetes.default.svc.corp") },
			expect: allowSANs("kubernetes.default.svc.corp"), wantKind: CSRServing, wantRule: RuleServingClusterNames},
		{name: "serving kubernetes Service IP", base: validServing, edit: func(s *csrSpec) { s.ips = append(s.ips, "10.96.0.1") },
			expect: allowSANs("10.96.0.1"), wantKind: CSRServing, wantRule: RuleServingClusterNames, wantDetail: "IP address 10.96.0.1 is the API server's"},
		{name: "serving address in the service network", base: validServing, edit: func(s *csrSpec) { s.ips = append(s.ips, "10.100.3.4") },
			expect: allowSANs("10.100.3.4"), wantKind: CSRServing, wantRule: RuleServingClusterNames, wantDetail: "is in the service network 10.96.0.0/12"},
		{name: "serving address in the IPv6 service network", base: validServing, edit: func(s *csrSpec) { s.ips = append(s.ips, "fd00:96::a") },
			expect: allowSANs("fd00:96::a"), wantKind: CSRServing, wantRule: RuleServingClusterNames},
		{name: "serving API server endpoint", base: validServing, edit: func(s *csrSpec) { s.ips = append(s.ips, "192.168.1.11") },
			expect: allowSANs("192.168.1.11"), wantKind: CSRServing, wantRule: RuleServingClusterNames, wantDetail: "the API server's"},
		{name: "serving API server endpoint, IPv4-mapped", base: validServing, edit: func(s *csrSpec) { s.ips = append(s.ips, "::ffff:192.168.1.10") },
			expect: allowSANs("192.168.1.10"), wantKind: CSRServing, wantRule: RuleServingClusterNames},
		{name: "serving with the cluster's addresses unread", base: validServing, expect: func(e *Expectation) { e.Cluster = nil },
			wantKind: CSRServing, wantRule: RuleServingClusterNames, wantDetail: "were not read"},
		{name: "serving name merely starting with kubernetes", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "kubernetes-win.example.com") },
			expect: allowSANs("kubernetes-win.example.com"), node: nodeWith("kubernetes-win.example.com"), wantKind: CSRServing},
		{name: "client unaffected by the cluster's addresses unread", base: validClient, expect: func(e *Expectation) { e.Cluster = nil }, node: noNode, wantKind: CSRClient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.base
			s.usages = append([]certificatesv1.KeyUsage(nil), s.usages...)
			if tt.edit != nil {
				tt.edit(&s)
			}
			want := testExpect
			if tt.expect != nil {
				tt.expect(&want)
			}
			node := (*corev1.Node)(nil)
			if tt.base.signer == certificatesv1.KubeletServingSignerName {
				node = testNodeObj()
			}
			if tt.node != nil {
				node = tt.node()
			}
			kind, err := Validate(makeCSR(t, "csr-x", s), want, node)
			assert.Equal(t, tt.wantKind, kind)
			if tt.wantRule == "" {
				require.NoError(t, err)
				return
			}
			var re *RuleError
			require.True(t, errors.As(err, &re), "want rule %s, got %v", tt.wantRule, err)
			assert.Equal(t, tt.wantRule, re.Rule, re.Detail)
			assert.Contains(t, err.Error(), "rule "+tt.wantRule+": ")
			assert.Contains(t, re.Detail, tt.wantDetail)
		})
	}
}

// allowSANs adds names or addresses to the instance's expectation, so
// that a test shows the cluster rule refusing them on its own.
func allowSANs(extra ...string) func(*Expectation) {
	return func(e *Expectation) {
		e.Addresses = append(slices.Clone(e.Addresses), extra...)
	}
}

// nodeWith is testNodeObj with extra Hostname addresses (DNS) or
// InternalIPs (IP).
func nodeWith(extra ...string) func() *corev1.Node {
	return func() *corev1.Node {
		n := testNodeObj()
		for _, x := range extra {
			t := corev1.NodeHostName
			if net.ParseIP(x) != nil {
				t = corev1.NodeInternalIP
			}
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: t, Address: x})
		}
		return n
	}
}

func TestValidateBadRequests(t *testing.T) {
	good := makeCSR(t, "x", validClient)
	block, _ := pem.Decode(good.Spec.Request)
	tampered := append([]byte(nil), block.Bytes...)
	tampered[len(tampered)-3] ^= 0xff // inside the signature

	tests := []struct {
		name    string
		request []byte
		detail  string
	}{
		{"empty", nil, "not a PEM CERTIFICATE REQUEST"},
		{"certificate instead", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}), "not a PEM CERTIFICATE REQUEST"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte("junk")}), "does not parse"},
		{"bad signature", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), "signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csr := good.DeepCopy()
			csr.Spec.Request = tt.request
			kind, err := Validate(csr, testExpect, nil)
			assert.Equal(t, CSRClient, kind)
			var re *RuleError
			require.True(t, errors.As(err, &re), "%v", err)
			assert.Equal(t, RuleRequest, re.Rule)
			assert.Contains(t, re.Detail, tt.detail)
		})
	}
}

func TestJudgeOneClientPerJoin(t *testing.T) {
	at := func(d time.Duration) func(*csrSpec) {
		return func(s *csrSpec) { s.created = testStart.Add(d) }
	}
	approved := func(c *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		return c
	}
	mk := func(name string, base csrSpec, edits ...func(*csrSpec)) *certificatesv1.CertificateSigningRequest {
		s := base
		for _, e := range edits {
			e(&s)
		}
		return makeCSR(t, name, s)
	}
	badUsage := func(s *csrSpec) { s.usages = []certificatesv1.KeyUsage{"client auth"} }
	tests := []struct {
		name       string
		csrs       []*certificatesv1.CertificateSigningRequest
		want       Expectation
		wantClient string
		verdicts   map[string]string // pending CSR → rule, "" approvable
	}{
		{
			name: "first valid pending wins, later ones refused",
			csrs: []*certificatesv1.CertificateSigningRequest{
				mk("c3", validClient, at(3*time.Minute)), mk("c1", validClient, at(time.Minute), badUsage),
				mk("c2", validClient, at(2*time.Minute)), mk("other-node", validClient, at(time.Minute), func(s *csrSpec) { s.cn = "system:node:win-2" }),
			},
			want: testExpect, wantClient: "c2",
			verdicts: map[string]string{"c1": RuleClientUsages, "c2": "", "c3": RuleClientOnce},
		},
		{
			name: "an approved one in the window takes the place",
			csrs: []*certificatesv1.CertificateSigningRequest{
				mk("c1", validClient, at(2*time.Minute)), approved(mk("done", validClient, at(3*time.Minute))),
			},
			want: testExpect, wantClient: "done",
			verdicts: map[string]string{"c1": RuleClientOnce},
		},
		{
			name: "an approved one from before the window does not count",
			csrs: []*certificatesv1.CertificateSigningRequest{
				approved(mk("old", validClient, at(-time.Hour))), mk("c1", validClient, at(time.Minute)),
			},
			want: testExpect, wantClient: "c1",
			verdicts: map[string]string{"c1": ""},
		},
		{
			name: "the caller's record wins",
			csrs: []*certificatesv1.CertificateSigningRequest{mk("c1", validClient), mk("c2", validClient, at(2*time.Minute))},
			want: func() Expectation { e := testExpect; e.ClientCSR = "c2"; return e }(), wantClient: "c2",
			verdicts: map[string]string{"c1": RuleClientOnce, "c2": ""},
		},
		{
			name: "a stale pending one is refused and does not count",
			csrs: []*certificatesv1.CertificateSigningRequest{mk("stale", validClient, at(-time.Hour)), mk("c1", validClient)},
			want: testExpect, wantClient: "c1",
			verdicts: map[string]string{"stale": RuleNotBefore, "c1": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items := make([]certificatesv1.CertificateSigningRequest, len(tt.csrs))
			for i, c := range tt.csrs {
				items[i] = *c
			}
			got, want := Judge(items, tt.want, nil)
			assert.Equal(t, tt.wantClient, want.ClientCSR)
			verdicts := map[string]string{}
			for i, c := range got {
				if i > 0 {
					assert.False(t, c.CSR.CreationTimestamp.Before(&got[i-1].CSR.CreationTimestamp), "oldest first")
				}
				if c.State != CSRPending {
					continue
				}
				verdicts[c.Name] = ""
				var re *RuleError
				if errors.As(c.Err, &re) {
					verdicts[c.Name] = re.Rule
				}
			}
			assert.Equal(t, tt.verdicts, verdicts)
		})
	}
}

func TestConcernsNodeDespiteABadSignature(t *testing.T) {
	csr := makeCSR(t, "x", validClient)
	block, _ := pem.Decode(csr.Spec.Request)
	block.Bytes[len(block.Bytes)-3] ^= 0xff
	csr.Spec.Request = pem.EncodeToMemory(block)
	assert.True(t, CSRConcernsNode(csr, testNode), "a forged request naming the node is reported")
	_, err := Validate(csr, testExpect, nil)
	var re *RuleError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Equal(t, RuleRequest, re.Rule)
}

func TestRuleErrorsListBoundedly(t *testing.T) {
	s := validServing
	for i := range 500 {
		s.dns = append(s.dns, fmt.Sprintf("n%d.evil.example", i))
	}
	s.emails = []string{"a@b.c"}
	_, err := Validate(makeCSR(t, "x", s), testExpect, testNodeObj())
	var re *RuleError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Equal(t, RuleServingSANs, re.Rule)
	assert.Contains(t, re.Detail, "and 498 more")
	assert.Less(t, len(re.Detail), 600)
}

// TestNodeCSRsHoldTheWindow: a pending client CSR created hours before the
// run began is never approvable, whoever judges it: by the run's start
// (the run's cache's RunStart, injected here), and when a caller gives no
// window at all (the zero NotBefore used to mean "no window").
func TestNodeCSRsHoldTheWindow(t *testing.T) {
	runStart := testStart.Add(3 * time.Hour)
	old := makeCSR(t, "left-pending", validClient) // testStart + 1 min: hours before the run
	fresh := validClient
	fresh.created = runStart.Add(time.Minute)
	kc := fake.NewSimpleClientset(old, makeCSR(t, "this-run", fresh))
	cache := NewCache(Defaults{Start: runStart})
	require.Equal(t, runStart, cache.RunStart())

	verdicts := func(want Expectation) map[string]string {
		s, err := NodeCSRs(context.Background(), kc, want)
		require.NoError(t, err)
		out := map[string]string{}
		for _, c := range s.CSRs {
			out[c.Name] = ruleOf(c.Err)
		}
		return out
	}
	want := testExpect
	want.NotBefore = cache.RunStart()
	assert.Equal(t, map[string]string{"left-pending": RuleNotBefore, "this-run": ""}, verdicts(want), "judged by the run's start")
	want.NotBefore = time.Time{}
	assert.Equal(t, map[string]string{"left-pending": RuleNotBefore, "this-run": RuleNotBefore}, verdicts(want), "no window: nothing approvable")
	err := ApproveCSR(context.Background(), kc, "left-pending", want)
	assert.Equal(t, RuleNotBefore, ruleOf(err), "%v", err)

	var nilCache *Cache
	assert.True(t, nilCache.RunStart().IsZero(), "modules built without a run's cache have no window")
	assert.WithinDuration(t, time.Now(), NewCache(Defaults{}).RunStart(), time.Minute, "a new run starts when its cache is made")
}

func ruleOf(err error) string {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}
