package kubetest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// signer is the test CA that stands in for kube-controller-manager's
// csrsigning controller. Like kubeadm's cluster CA it is also the API
// server's client CA: certificates it issues authenticate their holder,
// which is what lets a kubelet use the client certificate it bootstrapped.
type signer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// caLifetime is long enough for any test or demo run; issued certificates
// never outlive it.
const caLifetime = 7 * 24 * time.Hour

func newSigner() (*signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-signer"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	return &signer{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs tmpl for pub with a fresh serial and returns the PEM
// certificate. Like the real signer, it never issues past the CA's expiry.
func (s *signer) issue(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if tmpl.NotAfter.After(s.cert.NotAfter) {
		tmpl.NotAfter = s.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.cert, pub, s.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// SignerCA is the PEM certificate of the CA SignCSR signs with. The API
// server trusts it for client certificates.
func (c *Cluster) SignerCA() []byte { return c.signer.pem }

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageDigitalSignature: x509.KeyUsageDigitalSignature,
	certificatesv1.UsageKeyEncipherment:  x509.KeyUsageKeyEncipherment,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageClientAuth: x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageServerAuth: x509.ExtKeyUsageServerAuth,
}

// SignCSR issues the certificate for an approved CSR and writes it to the
// CSR's status, as kube-controller-manager's signer does. It refuses a CSR
// that is not approved or is denied: a real signer never issues those, and
// a test that needs it has a bug. It returns the certificate PEM.
func (c *Cluster) SignCSR(ctx context.Context, name string) ([]byte, error) {
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: signing CSR %s: %w", name, err)
	}
	return c.sign(ctx, csr)
}

// sign issues csr's certificate and writes it with csr's resourceVersion,
// so a CSR changed meanwhile (signed by someone else) is a conflict, not a
// second certificate.
func (c *Cluster) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	name := csr.Name
	approved := false
	for _, cond := range csr.Status.Conditions {
		switch {
		case cond.Type == certificatesv1.CertificateDenied && cond.Status == corev1.ConditionTrue:
			return nil, fmt.Errorf("kubetest: CSR %s is denied; a signer does not sign it", name)
		case cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue:
			approved = true
		}
	}
	if !approved {
		return nil, fmt.Errorf("kubetest: CSR %s is not approved; a signer does not sign it yet", name)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("kubetest: CSR %s: spec.request holds no PEM CERTIFICATE REQUEST", name)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("kubetest: CSR %s: %w", name, err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("kubetest: CSR %s: %w", name, err)
	}
	lifetime := 24 * time.Hour
	if s := csr.Spec.ExpirationSeconds; s != nil {
		lifetime = time.Duration(*s) * time.Second
	}
	tmpl := &x509.Certificate{
		Subject:        req.Subject,
		DNSNames:       req.DNSNames,
		IPAddresses:    req.IPAddresses,
		EmailAddresses: req.EmailAddresses,
		URIs:           req.URIs,
		NotBefore:      time.Now().Add(-time.Minute),
		NotAfter:       time.Now().Add(lifetime),
	}
	for _, u := range csr.Spec.Usages {
		tmpl.KeyUsage |= keyUsages[u]
		if eku, ok := extKeyUsages[u]; ok {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, eku)
		}
	}
	certPEM, err := c.signer.issue(tmpl, req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("kubetest: CSR %s: %w", name, err)
	}
	c.logf("kubetest: as the CSR signer (%s): issuing the certificate for CSR %s (%s)", csr.Spec.SignerName, name, req.Subject.CommonName)
	csr = csr.DeepCopy()
	csr.Status.Certificate = certPEM
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("kubetest: writing the certificate of CSR %s: %w", name, err)
	}
	return certPEM, nil
}
