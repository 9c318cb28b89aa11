package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

var testKey = func() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}()

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
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, testKey)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func makeCSR(t testing.TB, name string, s csrSpec) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
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
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		base     csrSpec
		edit     func(*csrSpec)
		expect   func(*Expectation)
		wantKind string
		wantRule string // "" means approvable
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
		{name: "Node already exists", base: validClient, expect: func(e *Expectation) { e.NodeExists = true }, wantKind: CSRClient, wantRule: RuleNodeExists},

		// Serving rules.
		{name: "serving Node existing is fine", base: validServing, expect: func(e *Expectation) { e.NodeExists = true }, wantKind: CSRServing},
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
		{name: "serving DNS not the host's", base: validServing, edit: func(s *csrSpec) { s.dns = append(s.dns, "kubernetes.default.svc") }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving DNS suffix trick", base: validServing, edit: func(s *csrSpec) { s.dns = []string{"win-1.example.com.evil.com"} }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving email SAN", base: validServing, edit: func(s *csrSpec) { s.emails = []string{"a@b.c"} }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving URI SAN", base: validServing, edit: func(s *csrSpec) { s.uris = []string{"https://win-1"} }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving without any SAN", base: validServing, edit: func(s *csrSpec) { s.dns, s.ips = nil, nil }, wantKind: CSRServing, wantRule: RuleServingSANs},
		{name: "serving with no addresses expected", base: validServing, expect: func(e *Expectation) { e.Addresses = nil }, wantKind: CSRServing, wantRule: RuleServingSANs},
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
			kind, err := Validate(makeCSR(t, "csr-x", s), want)
			assert.Equal(t, tt.wantKind, kind)
			if tt.wantRule == "" {
				require.NoError(t, err)
				return
			}
			var re *RuleError
			require.True(t, errors.As(err, &re), "want rule %s, got %v", tt.wantRule, err)
			assert.Equal(t, tt.wantRule, re.Rule, re.Detail)
			assert.Contains(t, err.Error(), "rule "+tt.wantRule+": ")
		})
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
			kind, err := Validate(csr, testExpect)
			assert.Equal(t, CSRClient, kind)
			var re *RuleError
			require.True(t, errors.As(err, &re), "%v", err)
			assert.Equal(t, RuleRequest, re.Rule)
			assert.Contains(t, re.Detail, tt.detail)
		})
	}
}
