package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"

	"github.com/wsu-project/wsu/agent/platform/sim"
)

// The identity OVN-Kubernetes gives a node's own components, and the file
// name prefix of its certificate in --cert-dir (WMCO cleans up
// ovnkube-client-* files there).
const (
	identityPrefix = "system:ovn-node:"
	identityGroup  = "system:ovn-nodes"
	certPrefix     = "ovnkube-client"
)

// connect returns a client authenticated as system:ovn-node:<node>, once
// the certificate manager holds a certificate for it: one from --cert-dir
// still valid, else one requested with the bootstrap kubeconfig and issued
// after the cluster approved it. The manager keeps renewing it until ctx
// ends.
func connect(ctx context.Context, h *sim.Host, cfg config, log *logger) (kubernetes.Interface, error) {
	boot, ca, err := waitCredentials(ctx, h, cfg, log)
	if err != nil {
		return nil, err
	}
	dir, err := h.LocalPath(cfg.certDir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("--cert-dir: %w", err)
	}
	store, err := certificate.NewFileStore(certPrefix, dir, dir, "", "")
	if err != nil {
		return nil, err
	}
	own := &rest.Config{Host: cfg.apiServer, TLSClientConfig: rest.TLSClientConfig{
		CAData: ca, CertFile: store.CurrentPath(), KeyFile: store.CurrentPath()}}
	cn := identityPrefix + cfg.node
	m, err := certificate.NewManager(&certificate.Config{
		Name: "hybrid-overlay-node",
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current == nil {
				return kubernetes.NewForConfig(boot)
			}
			return kubernetes.NewForConfig(own)
		},
		Template:                     &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{identityGroup}}},
		RequestedCertificateLifetime: &cfg.certDuration,
		SignerName:                   certificatesv1.KubeAPIServerClientSignerName,
		Usages:                       []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		CertificateStore:             store,
	})
	if err != nil {
		return nil, err
	}
	m.Start()
	go func() { <-ctx.Done(); m.Stop() }()
	log.printf("waiting for the client certificate of %s (%s)", cn, certificatesv1.KubeAPIServerClientSignerName)
	for m.Current() == nil {
		if err := sleep(ctx, poll); err != nil {
			return nil, err
		}
	}
	leaf := m.Current().Leaf
	if leaf != nil {
		log.printf("client certificate for %s, valid until %s (%s)", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format("2006-01-02T15:04:05Z"), store.CurrentPath())
	}
	return kubernetes.NewForConfig(own)
}

// waitCredentials waits for the bootstrap kubeconfig (the kubelet writes
// it once its own certificate is issued) and the CA bundle.
func waitCredentials(ctx context.Context, h *sim.Host, cfg config, log *logger) (*rest.Config, []byte, error) {
	kc, err := h.LocalPath(cfg.bootstrapKubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--bootstrap-kubeconfig: %w", err)
	}
	caPath, err := h.LocalPath(cfg.caCert)
	if err != nil {
		return nil, nil, fmt.Errorf("--k8s-cacert: %w", err)
	}
	var last string
	for {
		rc, err := loadKubeconfig(h, kc)
		var ca []byte
		if err == nil {
			ca, err = os.ReadFile(caPath)
		}
		if err == nil && len(ca) == 0 {
			err = errors.New(cfg.caCert + " is empty")
		}
		if err == nil {
			return rc, ca, nil
		}
		if msg := err.Error(); msg != last {
			log.printf("waiting for a usable bootstrap kubeconfig %s and CA %s: %v", cfg.bootstrapKubeconfig, cfg.caCert, err)
			last = msg
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, nil, err
		}
	}
}
