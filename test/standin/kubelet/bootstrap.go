package main

import (
	"context"
	"crypto"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// minValidity: a certificate closer to expiry than this is renewed at
// start rather than reused.
const minValidity = 10 * time.Minute

// tmpKeyFile caches the client key until its CSR is issued, as the kubelet
// does: a restart while the CSR is pending finds the same CSR (its name is
// a digest of key, subject and usages) instead of making another.
const tmpKeyFile = "kubelet-client.key.tmp"

// clientCertificate returns a client authenticated as the node: from the
// kubeconfig if its certificate is still good, else after a TLS bootstrap.
func clientCertificate(ctx context.Context, o *options) (kubernetes.Interface, error) {
	if cs, ok := reuseKubeconfig(ctx, o); ok {
		return cs, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if o.bootstrapKubeconfig == "" {
		return nil, fmt.Errorf("%s holds no usable client certificate and there is no --bootstrap-kubeconfig", o.kubeconfig)
	}
	bcfg, err := clientcmd.BuildConfigFromFlags("", o.bootstrapKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("unable to load bootstrap kubeconfig: %w", err)
	}
	boot, err := kubernetes.NewForConfig(bcfg)
	if err != nil {
		return nil, err
	}
	store, err := certificate.NewFileStore("kubelet-client", o.certDir, o.certDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("unable to build bootstrap cert store: %w", err)
	}
	keyPath := filepath.Join(o.certDir, tmpKeyFile)
	keyPEM, generated, err := keyutil.LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return nil, err
	}
	if !generated {
		log.Printf("reusing the key of an unfinished bootstrap (%s)", keyPath)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	subject := &pkix.Name{CommonName: "system:node:" + o.nodeName, Organization: []string{"system:nodes"}}
	reqPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("unable to generate certificate request: %w", err)
	}
	// The kubelet's usages: key encipherment only for an RSA key.
	usages := certificate.DefaultKubeletClientGetUsages(key)
	name, err := digestedName(key.(crypto.Signer).Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	log.Printf("bootstrapping: requesting a client certificate (CSR %s, signer %s) with %s", name, certificatesv1.KubeAPIServerClientKubeletSignerName, o.bootstrapKubeconfig)
	var reqName string
	var reqUID types.UID
	err = retryTransient(ctx, "creating the client CSR", func() error {
		n, uid, err := csr.RequestCertificateWithContext(ctx, boot, reqPEM, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
		reqName, reqUID = n, uid
		return err
	})
	if err != nil {
		return nil, err
	}
	log.Printf("waiting for CSR %s to be approved and issued", reqName)
	certPEM, err := csr.WaitForCertificate(ctx, boot, reqName, reqUID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("client CSR %s: %w", reqName, err)
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("storing the client certificate: %w", err)
	}
	if err := os.Remove(keyPath); err != nil && !os.IsNotExist(err) {
		log.Printf("removing %s: %v", keyPath, err)
	}
	if err := writeKubeconfig(o.kubeconfig, bcfg, certPEM, keyPEM); err != nil {
		return nil, err
	}
	log.Printf("client certificate issued (CSR %s); wrote %s and %s", reqName, o.kubeconfig, store.CurrentPath())
	ncfg := rest.AnonymousClientConfig(bcfg)
	ncfg.CertData, ncfg.KeyData = certPEM, keyPEM
	return kubernetes.NewForConfig(ncfg)
}

// reuseKubeconfig uses the kubeconfig if its certificate is this node's,
// valid for a while yet, and accepted by the API server.
func reuseKubeconfig(ctx context.Context, o *options) (kubernetes.Interface, bool) {
	if _, err := os.Stat(o.kubeconfig); err != nil {
		return nil, false
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		log.Printf("%s does not load (%v): bootstrapping", o.kubeconfig, err)
		return nil, false
	}
	certPEM := cfg.CertData
	if len(certPEM) == 0 && cfg.CertFile != "" {
		certPEM, _ = os.ReadFile(cfg.CertFile)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) == 0 {
		log.Printf("%s holds no client certificate: bootstrapping", o.kubeconfig)
		return nil, false
	}
	leaf := certs[0]
	if want := "system:node:" + o.nodeName; leaf.Subject.CommonName != want {
		log.Printf("%s is for %q, not %q: bootstrapping", o.kubeconfig, leaf.Subject.CommonName, want)
		return nil, false
	}
	if left := time.Until(leaf.NotAfter); left < minValidity {
		log.Printf("the client certificate in %s expires in %s: bootstrapping", o.kubeconfig, left.Round(time.Second))
		return nil, false
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, false
	}
	var user string
	err = retryTransient(ctx, "checking the client certificate", func() error {
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil {
			user = r.Status.UserInfo.Username
		}
		return err
	})
	if err != nil {
		log.Printf("the API server does not accept the client certificate in %s (%v): bootstrapping", o.kubeconfig, err)
		return nil, false
	}
	log.Printf("reusing the client certificate in %s (user %s, valid until %s)", o.kubeconfig, user, leaf.NotAfter.UTC().Format(time.RFC3339))
	return cs, true
}

// retryTransient retries fn while the API server is unreachable or busy,
// for up to a minute (the kubelet waits a minute for the server too), and
// returns any other error at once.
func retryTransient(ctx context.Context, what string, fn func() error) error {
	deadline := time.Now().Add(time.Minute)
	delay := 200 * time.Millisecond
	for {
		err := fn()
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return err
		}
		log.Printf("%s: %v (retrying)", what, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func transient(err error) bool {
	var netErr net.Error
	var x509Err x509.UnknownAuthorityError
	switch {
	case errors.As(err, &x509Err):
		return false
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return false
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err):
		return true
	case errors.As(err, &netErr):
		return true
	}
	return false
}

// writeKubeconfig writes the node's kubeconfig: the bootstrap
// kubeconfig's server and CA, and the client certificate and key embedded
// (the real kubelet points at kubelet-client-current.pem; embedding keeps
// it usable by other stand-ins without translating a Windows path).
// Temp file and rename: a reader never sees half of it.
func writeKubeconfig(path string, boot *rest.Config, certPEM, keyPEM []byte) error {
	ca := boot.CAData
	if len(ca) == 0 && boot.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(boot.CAFile); err != nil {
			return fmt.Errorf("bootstrap kubeconfig CA: %w", err)
		}
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": {Server: boot.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: boot.Insecure}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificateData: certPEM, ClientKeyData: keyPEM}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	b, err := clientcmd.Write(kc)
	if err != nil {
		return err
	}
	return writeAtomic(path, b, 0o600)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// digestedName is the kubelet's client CSR name: a digest of the public
// key, subject and usages (pkg/kubelet/certificate/bootstrap).
func digestedName(publicKey any, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	hash := sha512.New512_256()
	const delimiter = '|'
	encode := base64.RawURLEncoding.EncodeToString
	write := func(data []byte) {
		hash.Write([]byte(encode(data)))
		hash.Write([]byte{delimiter})
	}
	der, err := x509.MarshalPKIXPublicKey(publicKey)
	if err != nil {
		return "", err
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, v := range subject.Organization {
		write([]byte(v))
	}
	for _, v := range usages {
		write([]byte(v))
	}
	return "node-csr-" + encode(hash.Sum(nil)), nil
}
