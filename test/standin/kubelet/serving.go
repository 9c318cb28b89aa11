package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"log"
	"net"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// servingCertificate makes sure cert-dir holds a serving certificate for
// the node's current names, requesting one as the kubelet's server
// certificate manager does (serverTLSBootstrap). A denied or failed request
// is retried with a new CSR after a back-off, as the manager does.
func servingCertificate(ctx context.Context, cs kubernetes.Interface, o *options) {
	store, err := certificate.NewFileStore("kubelet-server", o.certDir, o.certDir, "", "")
	if err != nil {
		log.Printf("serving certificate store: %v", err)
		return
	}
	if cur, err := store.Current(); err == nil && cur.Leaf != nil && servingCertFits(cur.Leaf, o) {
		log.Printf("reusing the serving certificate %s (valid until %s)", store.CurrentPath(), cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
		return
	}
	delay := 5 * time.Second
	for {
		err := requestServing(ctx, cs, o, store)
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Printf("serving certificate: %v (retrying in %s)", err, delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Minute)
	}
}

// servingCertFits: valid for a while yet, and naming exactly this node's
// IP and host name.
func servingCertFits(c *x509.Certificate, o *options) bool {
	return time.Until(c.NotAfter) >= minValidity &&
		c.Subject.CommonName == "system:node:"+o.nodeName &&
		slices.Equal(c.DNSNames, []string{o.hostname}) &&
		len(c.IPAddresses) == 1 && c.IPAddresses[0].Equal(o.nodeIP)
}

func requestServing(ctx context.Context, cs kubernetes.Interface, o *options, store certificate.FileStore) error {
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return err
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return err
	}
	// The kubelet's template: its names come from the node's addresses
	// (Hostname → DNS, InternalIP → IP).
	reqPEM, err := certutil.MakeCSRFromTemplate(key, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:" + o.nodeName, Organization: []string{"system:nodes"}},
		DNSNames:    []string{o.hostname},
		IPAddresses: []net.IP{o.nodeIP},
	})
	if err != nil {
		return err
	}
	usages := certificate.DefaultKubeletServingGetUsages(key)
	var name string
	err = retryTransient(ctx, "creating the serving CSR", func() error {
		n, uid, err := csr.RequestCertificateWithContext(ctx, cs, reqPEM, "", certificatesv1.KubeletServingSignerName, nil, usages, key)
		if err != nil {
			return err
		}
		name = n
		log.Printf("requested a serving certificate: CSR %s (signer %s); waiting for approval", n, certificatesv1.KubeletServingSignerName)
		certPEM, err := csr.WaitForCertificate(ctx, cs, n, uid)
		if err != nil {
			return err
		}
		if _, err := store.Update(certPEM, keyPEM); err != nil {
			return err
		}
		log.Printf("serving certificate issued (CSR %s); wrote %s", n, store.CurrentPath())
		return nil
	})
	if err != nil && name != "" {
		log.Printf("serving CSR %s: %v", name, err)
	}
	return err
}
