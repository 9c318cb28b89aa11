// Package tokenjoin checks the three inputs of kubeadm's token-discovery
// join: the bootstrap token, the API server endpoint and the CA
// certificate hashes. Each is checked the same way wherever it arrives (a
// kubeadm JoinConfiguration file, a playbook's variables, the discovery
// itself), so a value one face accepts another cannot refuse. It imports
// only the standard library: the JoinConfiguration parser uses it without
// pulling in the Kubernetes client.
package tokenjoin

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// A bootstrap token's form: kubeadm's BootstrapTokenRegexp.
const (
	TokenIDLen     = 6
	TokenSecretLen = 16
	TokenAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789"
	// CACertHashPrefix starts a CA pin: kubeadm's pubkeypin format,
	// sha256 over the certificate's DER SubjectPublicKeyInfo.
	CACertHashPrefix = "sha256:"
)

// The refusals of the parsers; their errors wrap one.
var (
	ErrBadToken      = errors.New("invalid bootstrap token")
	ErrBadCACertHash = errors.New("invalid CA certificate hash")
	ErrBadEndpoint   = errors.New("invalid API server endpoint")
)

// ParseBootstrapToken splits "<id>.<secret>" as kubeadm's token format
// requires (6 and 16 characters of [a-z0-9]). Its error never repeats the
// token.
func ParseBootstrapToken(s string) (id, secret string, err error) {
	id, secret, ok := strings.Cut(s, ".")
	if !ok || !ValidTokenPart(id, TokenIDLen) || !ValidTokenPart(secret, TokenSecretLen) {
		return "", "", fmt.Errorf("%w: a bootstrap token is <id>.<secret>, %d and %d lower-case letters or digits (kubeadm token create prints one)",
			ErrBadToken, TokenIDLen, TokenSecretLen)
	}
	return id, secret, nil
}

// ValidTokenPart says whether s is n characters of TokenAlphabet.
func ValidTokenPart(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune(TokenAlphabet, c) {
			return false
		}
	}
	return true
}

// ParseAPIServerEndpoint returns the "host:port" of an endpoint given as
// "host:port" or "https://host:port".
func ParseAPIServerEndpoint(s string) (string, error) {
	hostPort := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("%w: %q must be host:port or https://host:port, with no path", ErrBadEndpoint, s)
		}
		hostPort = u.Host
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || strings.ContainsAny(host, "/@ ") {
		return "", fmt.Errorf("%w: %q must be host:port, like 10.0.0.1:6443 (kubeadm's apiServerEndpoint)", ErrBadEndpoint, s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%w: %q: port %q is not a number from 1 to 65535", ErrBadEndpoint, s, port)
	}
	return net.JoinHostPort(host, port), nil
}

// CACertHash is a certificate's public-key pin, "sha256:<hex>", as
// `kubeadm token create --print-join-command` prints it.
func CACertHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return CACertHashPrefix + hex.EncodeToString(sum[:])
}

// ParseCACertHashes checks pins ("sha256:<64 hex digits>"; the format name
// in any case, as kubeadm accepts) and returns them normalised to lower
// case.
func ParseCACertHashes(pins []string) ([]string, error) {
	out := make([]string, 0, len(pins))
	for _, p := range pins {
		pin, err := ParseCACertHash(p)
		if err != nil {
			return nil, err
		}
		out = append(out, pin)
	}
	return out, nil
}

// ParseCACertHash is ParseCACertHashes for one pin.
func ParseCACertHash(p string) (string, error) {
	format, value, ok := strings.Cut(p, ":")
	if !ok || !strings.EqualFold(format, "sha256") {
		return "", fmt.Errorf("%w: %q must be sha256:<hex>, the SHA-256 of the CA certificate's SubjectPublicKeyInfo", ErrBadCACertHash, p)
	}
	if b, err := hex.DecodeString(value); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("%w: %q: the value must be %d hexadecimal digits", ErrBadCACertHash, p, 2*sha256.Size)
	}
	return CACertHashPrefix + strings.ToLower(value), nil
}
