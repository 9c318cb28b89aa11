//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

var _ host.CertStore = (*winHost)(nil)

// x/sys/windows has no CertAddEncodedCertificateToStore; crypt32 exports it.
var procCertAddEncoded = windows.NewLazySystemDLL("crypt32.dll").NewProc("CertAddEncodedCertificateToStore")

const (
	certEncoding = windows.X509_ASN_ENCODING | windows.PKCS_7_ASN_ENCODING
	// cryptENotFound ends an enumeration (CRYPT_E_NOT_FOUND).
	cryptENotFound = windows.Errno(0x80092004)
)

// openStore opens a LocalMachine system store's registry part
// (CertOpenStore with CERT_STORE_PROV_SYSTEM_REGISTRY): where certlm.msc
// and certutil -addstore put certificates, and which the system store
// kubelet, containerd and WinHTTP read includes. Not CERT_STORE_PROV_SYSTEM,
// the collection over it (and group policy's stores): deleting through
// the collection is not reliable (under Wine it reports success and keeps
// the certificate), and what wsu adds and removes is the registry's.
func openStore(store string, readOnly bool) (windows.Handle, error) {
	if err := host.CheckStoreName(store); err != nil {
		return 0, err
	}
	name, err := windows.UTF16PtrFromString(store)
	if err != nil {
		return 0, err
	}
	flags := uint32(windows.CERT_SYSTEM_STORE_LOCAL_MACHINE | windows.CERT_STORE_OPEN_EXISTING_FLAG)
	if readOnly {
		flags |= windows.CERT_STORE_READONLY_FLAG
	}
	h, err := windows.CertOpenStore(windows.CERT_STORE_PROV_SYSTEM_REGISTRY, 0, 0, flags, uintptr(unsafe.Pointer(name)))
	if err != nil {
		return 0, fmt.Errorf("open LocalMachine certificate store %s: %w", store, err)
	}
	return h, nil
}

// encoded is a certificate context's DER bytes (not copied).
func encoded(c *windows.CertContext) []byte {
	return unsafe.Slice(c.EncodedCert, c.Length)
}

// eachCert calls fn with every certificate of an open store
// (CertEnumCertificatesInStore), stopping early when fn says so.
func eachCert(st windows.Handle, fn func(*windows.CertContext) (more bool, err error)) error {
	var c *windows.CertContext
	for {
		next, err := windows.CertEnumCertificatesInStore(st, c)
		if err != nil {
			if errors.Is(err, cryptENotFound) || next == nil {
				return nil
			}
			return fmt.Errorf("enumerate certificates: %w", err)
		}
		c = next
		more, err := fn(c)
		if err != nil || !more {
			windows.CertFreeCertificateContext(c)
			return err
		}
	}
}

// Certificates lists the store's thumbprints (the SHA-1 of each DER).
func (h *winHost) Certificates(ctx context.Context, store string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := openStore(store, true)
	if err != nil {
		return nil, err
	}
	defer windows.CertCloseStore(st, 0)
	var out []string
	err = eachCert(st, func(c *windows.CertContext) (bool, error) {
		out = append(out, host.Thumbprint(encoded(c)))
		return true, nil
	})
	return out, err
}

// AddCertificate adds a DER certificate with
// CertAddEncodedCertificateToStore, keeping one already there
// (CERT_STORE_ADD_USE_EXISTING).
func (h *winHost) AddCertificate(ctx context.Context, store string, der []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(der) == 0 {
		return errors.New("add certificate: empty certificate")
	}
	st, err := openStore(store, false)
	if err != nil {
		return err
	}
	defer windows.CertCloseStore(st, 0)
	if err := procCertAddEncoded.Find(); err != nil {
		return host.NotSupported("certificate add (crypt32 lacks CertAddEncodedCertificateToStore)", platform)
	}
	ok, _, callErr := procCertAddEncoded.Call(uintptr(st), certEncoding,
		uintptr(unsafe.Pointer(&der[0])), uintptr(len(der)), windows.CERT_STORE_ADD_USE_EXISTING, 0)
	if ok == 0 {
		return fmt.Errorf("add certificate %s to LocalMachine %s: %w", host.Thumbprint(der), store, callErr)
	}
	return nil
}

// DeleteCertificate removes every certificate with that thumbprint. The
// matches are collected (as duplicated contexts) and deleted after the
// enumeration ends: deleting in the middle of one left Wine's crypt32
// enumerating forever.
func (h *winHost) DeleteCertificate(ctx context.Context, store, thumbprint string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := host.CheckThumbprint(thumbprint); err != nil {
		return err
	}
	st, err := openStore(store, false)
	if err != nil {
		return err
	}
	defer windows.CertCloseStore(st, 0)
	want := strings.ToUpper(thumbprint)
	var found []*windows.CertContext
	err = eachCert(st, func(c *windows.CertContext) (bool, error) {
		if host.Thumbprint(encoded(c)) == want {
			found = append(found, windows.CertDuplicateCertificateContext(c))
		}
		return true, nil
	})
	for i, c := range found {
		if err != nil {
			windows.CertFreeCertificateContext(c)
			continue
		}
		// CertDeleteCertificateFromStore frees the context, even on failure.
		if derr := windows.CertDeleteCertificateFromStore(c); derr != nil {
			err = fmt.Errorf("delete certificate %s (%d of %d) from LocalMachine %s: %w", want, i+1, len(found), store, derr)
		}
	}
	return err
}
