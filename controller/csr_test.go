package controller

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/kube"
)

// TestRenewalExpectation: a renewal's serving names are bound to what the
// admin gave and wsu recorded (the node name, spec.address and the IPs a
// DNS address resolves to here, vars.node_ip or the controller's
// node_ip), never to a name or address the host reported of itself.
func TestRenewalExpectation(t *testing.T) {
	const node = "win-7"
	instance := func(address string, vars map[string]string) *wsuv1.WindowsInstance {
		wi := &wsuv1.WindowsInstance{Spec: wsuv1.WindowsInstanceSpec{Address: address, Vars: vars}}
		wi.Status.NodeName = node
		wi.Status.Identity = wsuv1.Identity{Hostname: "REPORTED-NAME", Addresses: []string{"192.168.50.7"}}
		return wi
	}
	nodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: node}, {Type: corev1.NodeHostName, Address: "reported-name"},
		{Type: corev1.NodeInternalDNS, Address: "win-7.example.com"},
		{Type: corev1.NodeInternalIP, Address: "192.168.50.7"}, {Type: corev1.NodeInternalIP, Address: "192.168.60.7"},
		{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeInternalDNS, Address: "localhost"},
	}}}
	cluster := &kube.ClusterAddresses{ServiceNetworks: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
	tests := []struct {
		name     string
		wi       *wsuv1.WindowsInstance
		dns, ips []string
		wantRule string
	}{
		{"node name and the address given", instance("192.168.50.7", nil), []string{node}, []string{"192.168.50.7"}, ""},
		{"a DNS address the admin gave", instance("win-7.example.com", nil), []string{node, "win-7.example.com"}, nil, ""},
		{"the IPs a DNS address resolves to", instance("localhost", nil), []string{node, "localhost"}, []string{"127.0.0.1"}, ""},
		{"vars.node_ip", instance("192.168.50.7", map[string]string{"node_ip": "192.168.60.7"}), []string{node}, []string{"192.168.60.7"}, ""},
		{"the admin's node_ip for the address", instance("win-8.example.com", nil), []string{node}, []string{"192.168.60.7"}, ""},
		{"the IP only the host reported", instance("win-7.example.com", nil), []string{node}, []string{"192.168.50.7"}, kube.RuleServingSANs},
		{"a host name only the host reported", instance("192.168.50.7", nil), []string{node, "reported-name"}, nil, kube.RuleServingSANs},
		{"an address nobody gave", instance("192.168.50.7", nil), []string{node}, []string{"192.168.60.7"}, kube.RuleServingSANs},
		{"the API server's name", instance("192.168.50.7", nil), []string{node, "kubernetes.default.svc"}, nil, kube.RuleServingClusterNames},
	}
	r := &CSRReconciler{AddressHostVars: map[string]map[string]string{"win-8.example.com": {"node_ip": "192.168.60.7"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := r.expectation(context.Background(), tt.wi)
			want.Cluster = cluster
			_, err := kube.Validate(servingCSR(t, node, tt.dns, tt.ips), want, nodeObj)
			if tt.wantRule == "" {
				require.NoError(t, err)
				return
			}
			var re *kube.RuleError
			require.True(t, errors.As(err, &re), "%v", err)
			assert.Equal(t, tt.wantRule, re.Rule, re.Detail)
		})
	}
}

// servingCSR is a kubelet serving CSR of node, as the node requests it.
func servingCSR(t *testing.T, node string, dns, ips []string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	require.NoError(t, err)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr", CreationTimestamp: metav1.Now()},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{"digital signature", "server auth"},
			Username:   "system:node:" + node,
			Groups:     []string{"system:nodes", "system:authenticated"},
		},
	}
}
