//go:build !windows

package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controlPlane is envtest's etcd and kube-apiserver pair. envtest does not
// compile for Windows (controller-runtime v0.25), hence this seam.
type controlPlane struct{ env *envtest.Environment }

// newControlPlane configures the API server as a kubeadm cluster's is
// where a node join depends on it: client certificates from the signer,
// bootstrap tokens, the Node authorizer and NodeRestriction. Everything
// else keeps envtest's defaults (RBAC, ServiceAccount admission off) unless
// serviceAccounts: with a kube-controller-manager to create each
// namespace's default ServiceAccount, the ServiceAccount admission plugin
// is on as in a real cluster (pods get their token volume).
func newControlPlane(etcd, apiserver string, clientCA *signer, serviceAccounts bool) *controlPlane {
	// envtest waits 20 s for etcd and for the API server to answer (five
	// tries); on a machine shared by many builds and test beds a start can
	// take longer (a minute and a half has been seen), so each try gets two
	// minutes. It sets both components' timeouts from this field.
	env := &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	api := env.ControlPlane.GetAPIServer()
	api.Path = apiserver
	api.SecureServing.Authn = &signerAuthn{ca: clientCA}
	admission := "NodeRestriction"
	if serviceAccounts {
		admission += ",ServiceAccount"
		api.Configure().Disable("disable-admission-plugins")
	}
	api.Configure().
		Set("enable-bootstrap-token-auth", "true").
		// envtest's own default, made explicit: kubeadm's objects name it.
		Set("service-cluster-ip-range", ServiceSubnet).
		Set("authorization-mode", "Node,RBAC").
		Set("enable-admission-plugins", admission)
	return &controlPlane{env: env}
}

// serviceAccountKey is the file of the key the API server signs
// service-account tokens with (envtest writes it into its certificate
// directory on start).
func (p *controlPlane) serviceAccountKey() string {
	return filepath.Join(p.env.ControlPlane.APIServer.CertDir, "sa-signer.key")
}

func (p *controlPlane) start() (*rest.Config, error) { return p.env.Start() }

// stop stops the API server, then etcd: the other order hangs the API
// server (envtest's ControlPlane.Stop keeps this order).
func (p *controlPlane) stop() error { return p.env.Stop() }

func (p *controlPlane) kubeconfig() []byte { return p.env.KubeConfig }

func (p *controlPlane) addUser(name string, groups []string) ([]byte, error) {
	u, err := p.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// signerAuthn replaces envtest's certificate authenticator, whose CA is
// private to controller-runtime: with the signer as the one client CA, the
// users envtest provisions (the admin, User) and the certificates SignCSR
// issues (a bootstrapped kubelet's) all authenticate, as with kubeadm's
// single cluster CA.
type signerAuthn struct {
	ca     *signer
	caFile string
}

var _ envtest.Authn = (*signerAuthn)(nil)

func (a *signerAuthn) Configure(workDir string, args *envtest.Arguments) error {
	a.caFile = filepath.Join(workDir, "client-ca.crt")
	args.Set("client-ca-file", a.caFile)
	return nil
}

func (a *signerAuthn) Start() error {
	if a.caFile == "" {
		return fmt.Errorf("kubetest: client CA started before it was configured")
	}
	return os.WriteFile(a.caFile, a.ca.pem, 0o640)
}

func (a *signerAuthn) AddUser(u envtest.User, base *rest.Config) (*rest.Config, error) {
	certPEM, keyPEM, err := a.ca.clientCert(u.Name, u.Groups)
	if err != nil {
		return nil, fmt.Errorf("kubetest: client certificate for %s: %w", u.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	return cfg, nil
}

func (a *signerAuthn) Stop() error { return nil }

// clientCert issues a client certificate for a user: the API server takes
// the common name as the user name and the organisations as its groups.
func (s *signer) clientCert(name string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = s.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: groups},
		NotBefore:   time.Now().Add(-time.Minute),
		NotAfter:    time.Now().Add(caLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func installCRDs(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, paths []string) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds, Paths: paths, ErrorIfPathMissing: true})
	return err
}
