package kube

// Token discovery (Discover): what `kubeadm join` does with
// discovery.bootstrapToken (cmd/kubeadm/app/discovery/token) before the
// node has any credential the API server trusts or any CA to trust the API
// server with.

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/wsu-project/wsu/kube/tokenjoin"
	"github.com/wsu-project/wsu/version"
)

// Discovery's bounds. kubeadm waits up to 5 minutes (its discovery
// timeout) and retries every 5 s; a node that runs wsu has usually been
// given a token the signer signed long ago, so a minute is plenty and an
// unknown token is reported sooner.
const (
	DefaultDiscoveryTimeout  = time.Minute
	DefaultDiscoveryInterval = 2 * time.Second
	// discoveryRequestTimeout bounds one read of cluster-info.
	discoveryRequestTimeout = 10 * time.Second
)

// The refusals and failures of Discover; a DiscoveryError wraps one.
var (
	ErrBadToken           = tokenjoin.ErrBadToken
	ErrBadCACertHash      = tokenjoin.ErrBadCACertHash
	ErrBadEndpoint        = tokenjoin.ErrBadEndpoint
	ErrNoCACertHashes     = errors.New("no CA certificate hashes")
	ErrTokenNotSigned     = errors.New("token unknown or expired")
	ErrBadSignature       = errors.New("cluster-info's signature does not verify")
	ErrCACertHashMismatch = errors.New("the cluster CA matches no CA certificate hash")
	ErrClusterInfoChanged = errors.New("cluster-info changed between the reads")
	ErrBadClusterInfo     = errors.New("cluster-info is unusable")
	ErrServerUnverified   = errors.New("the API server is not verified by the cluster CA")
	ErrUnreachable        = errors.New("cannot read cluster-info")
)

// DiscoveryInput names the input a DiscoveryError concerns, so a caller
// can point at the argument to fix.
type DiscoveryInput string

const (
	InputEndpoint     DiscoveryInput = "endpoint"
	InputToken        DiscoveryInput = "token"
	InputCACertHashes DiscoveryInput = "ca_cert_hashes"
)

// DiscoveryError is why Discover refused or failed: Err wraps one of the
// Err* values above and says what happened in a sentence, never with the
// token's secret.
type DiscoveryError struct {
	Input DiscoveryInput
	Err   error
}

func (e *DiscoveryError) Error() string { return e.Err.Error() }
func (e *DiscoveryError) Unwrap() error { return e.Err }

func discoveryErr(in DiscoveryInput, kind error, format string, args ...any) error {
	return &DiscoveryError{Input: in, Err: fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)}
}

// DiscoveryRequest is kubeadm's discovery.bootstrapToken.
type DiscoveryRequest struct {
	// Endpoint is the API server, "host:port" (kubeadm's
	// apiServerEndpoint) or "https://host:port".
	Endpoint string
	// Token is the bootstrap token, "<id>.<secret>". A credential.
	Token string
	// CACertHashes are "sha256:<hex>" pins of the CA's public key.
	CACertHashes []string
	// UnsafeSkipCAVerification accepts a CA no pin vouches for: the token's
	// signature is then all that ties cluster-info to the cluster.
	UnsafeSkipCAVerification bool
	// Timeout bounds the whole discovery, waiting for the token's
	// signature included; 0 means DefaultDiscoveryTimeout.
	Timeout time.Duration
	// Interval is the pause between reads while cluster-info has no
	// signature for the token or the server is unreachable; 0 means
	// DefaultDiscoveryInterval.
	Interval time.Duration
}

// Discovery is what a node learns from token discovery.
type Discovery struct {
	// Server is the API server URL the bootstrap kubeconfig uses:
	// https://<endpoint>, the address the CA was just verified at.
	Server string
	// ClusterInfoServer is the server cluster-info's kubeconfig names
	// (kubeadm's controlPlaneEndpoint): kubeadm join's TLS-bootstrap
	// kubeconfig takes this one. It is the same as Server when the node
	// joins through the control plane endpoint, as Cluster API's do.
	ClusterInfoServer string
	// CA is the cluster CA bundle (PEM) from cluster-info.
	CA []byte
	// CACertHash is the pin of the CA certificate that matched
	// CACertHashes, or of the bundle's first certificate when none were
	// given.
	CACertHash string
	// Pinned is false when no pin vouched for the CA
	// (UnsafeSkipCAVerification).
	Pinned bool
	// TokenID is the token's public id; Requester the identity the API
	// server gives it, system:bootstrap:<id>.
	TokenID, Requester string
	// BootstrapKubeconfig is the kubelet's --bootstrap-kubeconfig: Server,
	// CA and the token. A credential.
	BootstrapKubeconfig []byte
}

// discoveryPlan is a checked DiscoveryRequest.
type discoveryPlan struct {
	hostPort, server  string
	tokenID, secret   string
	pins              []string
	timeout, interval time.Duration
}

// check validates a request before anything is sent: bad input is the
// user's to fix and needs no server to find.
func (r DiscoveryRequest) check() (discoveryPlan, error) {
	var p discoveryPlan
	var err error
	if p.hostPort, err = tokenjoin.ParseAPIServerEndpoint(r.Endpoint); err != nil {
		return p, &DiscoveryError{Input: InputEndpoint, Err: err}
	}
	p.server = "https://" + p.hostPort
	if p.tokenID, p.secret, err = tokenjoin.ParseBootstrapToken(r.Token); err != nil {
		return p, &DiscoveryError{Input: InputToken, Err: err}
	}
	if p.pins, err = tokenjoin.ParseCACertHashes(r.CACertHashes); err != nil {
		return p, &DiscoveryError{Input: InputCACertHashes, Err: err}
	}
	if len(p.pins) == 0 && !r.UnsafeSkipCAVerification {
		return p, discoveryErr(InputCACertHashes, ErrNoCACertHashes,
			"token discovery without CA certificate hashes trusts whichever server knows the token; "+
				"give the cluster CA's sha256 pin (kubeadm token create --print-join-command prints it), "+
				"or set unsafe_skip_ca_verification to accept the CA on the token's signature alone")
	}
	p.timeout, p.interval = r.Timeout, r.Interval
	if p.timeout <= 0 {
		p.timeout = DefaultDiscoveryTimeout
	}
	if p.interval <= 0 {
		p.interval = DefaultDiscoveryInterval
	}
	return p, nil
}

// Discover does kubeadm's token discovery against req.Endpoint with no
// credential but the token, for a node that must not hold an admin
// kubeconfig (Cluster API's Windows nodes hold only a bootstrap token and
// the CA's pins). It gets the API server's CA from the anonymous,
// world-readable ConfigMap kube-public/cluster-info and accepts it only
// when
//   - kube-controller-manager's bootstrapsigner signed that ConfigMap's
//     kubeconfig with this very token (the detached JWS under
//     jws-kubeconfig-<token-id>): the server knows the token's secret, so
//     it is the cluster that issued the token, or someone who holds it;
//   - one of the CA's public keys matches a sha256 SubjectPublicKeyInfo
//     pin (CACertHashes), unless the caller waived the pins
//     (UnsafeSkipCAVerification, kubeadm's words): the token alone does
//     not keep out whoever else holds it;
//   - a second read, over TLS verified with that CA, returns the same
//     kubeconfig bytes: the server at the endpoint holds the CA's key.
//
// Only then does it build the kubelet's bootstrap kubeconfig (server, CA,
// token). Bad input is refused before any request. The token is never
// sent during discovery and never appears in an error; every refusal is a
// *DiscoveryError naming the input to fix. Discover waits at most
// req.Timeout, each read at most 10 s.
func Discover(ctx context.Context, req DiscoveryRequest) (*Discovery, error) {
	p, err := req.check()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	first, err := p.readSigned(ctx, nil)
	if err != nil {
		return nil, err
	}
	ca, err := p.verify(first)
	if err != nil {
		return nil, err
	}
	second, err := p.readSigned(ctx, ca.bundle)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal([]byte(second.Data[bootstrapapi.KubeConfigKey]), []byte(first.Data[bootstrapapi.KubeConfigKey])) {
		return nil, discoveryErr(InputEndpoint, ErrClusterInfoChanged,
			"the kubeconfig in %s/%s read over TLS verified with the cluster CA differs from the one read before: "+
				"a man in the middle answered the first read", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo)
	}
	kc, err := BootstrapKubeconfig(p.server, ca.bundle, p.tokenID+"."+p.secret)
	if err != nil {
		return nil, discoveryErr(InputEndpoint, ErrBadClusterInfo, "building the bootstrap kubeconfig: %v", err)
	}
	return &Discovery{
		Server: p.server, ClusterInfoServer: ca.server, CA: ca.bundle, CACertHash: ca.hash, Pinned: ca.pinned,
		TokenID: p.tokenID, Requester: BootstrapUserPrefix + p.tokenID,
		BootstrapKubeconfig: kc,
	}, nil
}

// clusterCA is the CA found in cluster-info, and the server named with
// it.
type clusterCA struct {
	server string
	bundle []byte
	hash   string
	pinned bool
}

// verify checks the first read: the token's signature over the kubeconfig,
// the kubeconfig's one cluster and its CA, and the CA against the pins.
func (p discoveryPlan) verify(cm *corev1.ConfigMap) (clusterCA, error) {
	content := cm.Data[bootstrapapi.KubeConfigKey]
	want, err := jws.ComputeDetachedSignature(content, p.tokenID, p.secret)
	if err != nil {
		return clusterCA{}, discoveryErr(InputToken, ErrBadSignature, "computing the token's signature: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(cm.Data[bootstrapapi.JWSSignatureKeyPrefix+p.tokenID])) != 1 {
		return clusterCA{}, discoveryErr(InputToken, ErrBadSignature,
			"%s/%s's signature does not verify with this token: altered ConfigMap or a man in the middle "+
				"(or the token's secret is wrong: its id %q is one the cluster signs for)",
			metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, p.tokenID)
	}
	server, bundle, err := clusterInfoCA(content)
	if err != nil {
		return clusterCA{}, err
	}
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return clusterCA{}, discoveryErr(InputEndpoint, ErrBadClusterInfo, "the kubeconfig's certificate-authority-data: %v", err)
	}
	if len(p.pins) == 0 {
		return clusterCA{server: server, bundle: bundle, hash: tokenjoin.CACertHash(certs[0])}, nil
	}
	var found []string
	for _, c := range certs {
		h := tokenjoin.CACertHash(c)
		for _, pin := range p.pins {
			if subtle.ConstantTimeCompare([]byte(h), []byte(pin)) == 1 {
				return clusterCA{server: server, bundle: bundle, hash: h, pinned: true}, nil
			}
		}
		found = append(found, h)
	}
	return clusterCA{}, discoveryErr(InputCACertHashes, ErrCACertHashMismatch,
		"the cluster CA in %s/%s has public key %s, which none of ca_cert_hashes (%s) pins: "+
			"a wrong pin, or a server that is not the cluster's",
		metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, strings.Join(found, ", "), strings.Join(p.pins, ", "))
}

// clusterInfoCA is the server and CA bundle of cluster-info's
// kubeconfig, which kubeadm writes with exactly one cluster.
func clusterInfoCA(content string) (server string, ca []byte, err error) {
	cfg, err := clientcmd.Load([]byte(content))
	if err != nil {
		return "", nil, discoveryErr(InputEndpoint, ErrBadClusterInfo, "its kubeconfig: %v", err)
	}
	if len(cfg.Clusters) != 1 {
		return "", nil, discoveryErr(InputEndpoint, ErrBadClusterInfo, "its kubeconfig has %d clusters, kubeadm writes one", len(cfg.Clusters))
	}
	for _, c := range cfg.Clusters {
		if len(c.CertificateAuthorityData) > 0 {
			return c.Server, c.CertificateAuthorityData, nil
		}
	}
	return "", nil, discoveryErr(InputEndpoint, ErrBadClusterInfo, "its kubeconfig has no certificate-authority-data")
}

// readSigned reads cluster-info anonymously until it carries a signature
// for the token, retrying through an unreachable or overloaded server,
// until ctx ends. ca nil means TLS unverified (the first read: no CA is
// known yet); otherwise the server must present a certificate ca verifies.
func (p discoveryPlan) readSigned(ctx context.Context, ca []byte) (*corev1.ConfigMap, error) {
	client, err := p.anonymousClient(ca)
	if err != nil {
		return nil, discoveryErr(InputEndpoint, ErrUnreachable, "%v", err)
	}
	var last error
	for {
		cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		switch {
		case err != nil && ctx.Err() != nil && last != nil:
			// The time ran out during a read: what the reads before it saw
			// is the reason.
			return nil, p.gaveUp(ctx, last)
		case err == nil && cm.Data[bootstrapapi.KubeConfigKey] == "":
			return nil, discoveryErr(InputEndpoint, ErrBadClusterInfo, "%s/%s at %s has no %s key: this API server is not set up for token discovery",
				metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, p.server, bootstrapapi.KubeConfigKey)
		case err == nil && cm.Data[bootstrapapi.JWSSignatureKeyPrefix+p.tokenID] != "":
			return cm, nil
		case err == nil:
			last = discoveryErr(InputToken, ErrTokenNotSigned,
				"%s/%s has no signature for token id %q (no %s%s key): the cluster does not know this token, or it expired "+
					"and kube-controller-manager's tokencleaner deleted it; create a new one (kubeadm token create)",
				metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, p.tokenID, bootstrapapi.JWSSignatureKeyPrefix, p.tokenID)
		case ca != nil && isCertificateError(err):
			return nil, discoveryErr(InputEndpoint, ErrServerUnverified,
				"the server at %s does not present a certificate the CA from cluster-info verifies: %v", p.server, err)
		case retryableRead(err):
			last = discoveryErr(InputEndpoint, ErrUnreachable, "reading %s/%s from %s: %v",
				metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, p.server, err)
		default:
			return nil, discoveryErr(InputEndpoint, ErrUnreachable, "reading %s/%s from %s anonymously: %v%s",
				metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, p.server, err, readHint(err))
		}
		select {
		case <-ctx.Done():
			return nil, p.gaveUp(ctx, last)
		case <-time.After(p.interval):
		}
	}
}

// gaveUp is the last failure, once the time is up or the run cancelled.
func (p discoveryPlan) gaveUp(ctx context.Context, last error) error {
	why := fmt.Sprintf("gave up after %s", p.timeout)
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "cancelled"
	}
	var de *DiscoveryError
	if errors.As(last, &de) {
		return &DiscoveryError{Input: de.Input, Err: fmt.Errorf("%w (%s)", de.Err, why)}
	}
	return fmt.Errorf("%w (%s)", last, why)
}

// anonymousClient reads the cluster with no credential: TLS unverified
// when ca is nil, verified with ca otherwise.
func (p discoveryPlan) anonymousClient(ca []byte) (kubernetes.Interface, error) {
	cfg := &rest.Config{
		Host:      p.server,
		Timeout:   min(discoveryRequestTimeout, p.timeout),
		UserAgent: "wsu/" + version.Version + " (token discovery)",
	}
	if ca == nil {
		cfg.Insecure = true
	} else {
		cfg.CAData = ca
	}
	return kubernetes.NewForConfig(cfg)
}

// retryableRead reports whether a failed read may succeed later: the
// server is starting, overloaded or not reachable yet.
func retryableRead(err error) bool {
	var netErr net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded)
}

// isCertificateError reports a TLS verification failure.
func isCertificateError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// readHint says what a refused anonymous read usually means.
func readHint(err error) string {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return " (kubeadm init lets system:anonymous get kube-public/cluster-info, Role kubeadm:bootstrap-signer-clusterinfo; the API server must allow anonymous requests)"
	case apierrors.IsNotFound(err):
		return " (kubeadm init publishes it; is this a kubeadm cluster?)"
	}
	return ""
}
