package host

import (
	"context"
	"crypto/sha1" //nolint:gosec // a certificate's thumbprint is its SHA-1, as Windows names it
	"encoding/hex"
	"fmt"
	"strings"
)

// CertStore reads and changes the LocalMachine system certificate stores
// (Root: the trusted roots that kubelet, containerd and the proxy path
// check TLS servers against). It is optional: only Windows hosts (and the
// simulated one) have one; callers type-assert and report a host without
// it. Certificates are named by thumbprint (Thumbprint).
type CertStore interface {
	// Certificates lists the thumbprints of the certificates in a
	// LocalMachine system store ("ROOT", "CA"), upper-case hex.
	Certificates(ctx context.Context, store string) ([]string, error)
	// AddCertificate adds a DER certificate to the store; one already
	// there is left as it is.
	AddCertificate(ctx context.Context, store string, der []byte) error
	// DeleteCertificate removes the certificate with that thumbprint; a
	// missing one is not an error.
	DeleteCertificate(ctx context.Context, store, thumbprint string) error
}

// Thumbprint is a DER certificate's SHA-1 in upper-case hex: what
// certutil, certlm.msc and PowerShell's Cert: drive call its thumbprint.
func Thumbprint(der []byte) string {
	sum := sha1.Sum(der) //nolint:gosec // see the import
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// CheckStoreName refuses a store name that is not a plain system store
// name (letters, at most 32): the name goes to CertOpenStore as is.
func CheckStoreName(store string) error {
	if store == "" || len(store) > 32 {
		return fmt.Errorf("certificate store name %q: want a system store name such as ROOT", store)
	}
	for _, r := range store {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return fmt.Errorf("certificate store name %q: want a system store name such as ROOT", store)
		}
	}
	return nil
}

// CheckThumbprint refuses what is not 40 hex digits.
func CheckThumbprint(tp string) error {
	if b, err := hex.DecodeString(tp); err != nil || len(b) != sha1.Size {
		return fmt.Errorf("thumbprint %q: want 40 hex digits", tp)
	}
	return nil
}
