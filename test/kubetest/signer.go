package kubetest

import (
	"context"
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
// csrsigning controller.
type signer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newSigner() (*signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-signer"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
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

// SignerCA is the PEM certificate of the CA SignCSR signs with.
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
	csrs := c.Client.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: signing CSR %s: %w", name, err)
	}
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
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.signer.cert, req.PublicKey, c.signer.key)
	if err != nil {
		return nil, fmt.Errorf("kubetest: CSR %s: %w", name, err)
	}
	c.logf("kubetest: as the CSR signer (%s): issuing the certificate for CSR %s (%s)", csr.Spec.SignerName, name, req.Subject.CommonName)
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("kubetest: writing the certificate of CSR %s: %w", name, err)
	}
	return csr.Status.Certificate, nil
}
