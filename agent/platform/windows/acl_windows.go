//go:build windows

package windows

import (
	"context"
	"fmt"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// FileACL reads path's owner and DACL with GetNamedSecurityInfo.
func (h *winHost) FileACL(ctx context.Context, path string) (host.ACL, error) {
	if err := ctx.Err(); err != nil {
		return host.ACL{}, err
	}
	const info = windows.OWNER_SECURITY_INFORMATION | windows.DACL_SECURITY_INFORMATION
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, info)
	if err != nil {
		return host.ACL{}, aclErr("get ACL", path, err)
	}
	acl, err := readDescriptor(sd)
	if err != nil {
		return host.ACL{}, aclErr("get ACL", path, err)
	}
	return acl, nil
}

// readDescriptor turns a security descriptor into an ACL.
func readDescriptor(sd *windows.SECURITY_DESCRIPTOR) (host.ACL, error) {
	var acl host.ACL
	if owner, _, err := sd.Owner(); err == nil && owner != nil {
		acl.Owner = owner.String()
	}
	control, _, err := sd.Control()
	if err != nil {
		return host.ACL{}, err
	}
	acl.Protected = control&windows.SE_DACL_PROTECTED != 0
	dacl, _, err := sd.DACL()
	if err != nil {
		// No DACL at all grants everyone everything: never a match.
		return host.ACL{}, fmt.Errorf("no DACL (everyone has full access): %w", err)
	}
	acl.Entries, err = aceList(dacl)
	return acl, err
}

// aceList reads the entries of a DACL. Entries other than plain allow and
// deny (object, callback, audit) are reported with their type in place of
// a SID, so they never match a wanted entry.
func aceList(dacl *windows.ACL) ([]host.ACE, error) {
	var out []host.ACE
	for i := uint32(0); i < uint32(dacl.AceCount); i++ {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return nil, err
		}
		e := host.ACE{
			Mask:      uint32(ace.Mask),
			Inherited: ace.Header.AceFlags&windows.INHERITED_ACE != 0,
		}
		switch ace.Header.AceType {
		case windows.ACCESS_ALLOWED_ACE_TYPE, windows.ACCESS_DENIED_ACE_TYPE:
			e.Deny = ace.Header.AceType == windows.ACCESS_DENIED_ACE_TYPE
			e.SID = (*windows.SID)(unsafe.Pointer(&ace.SidStart)).String()
		default:
			e.SID = fmt.Sprintf("(ACE type %d)", ace.Header.AceType)
		}
		out = append(out, e)
	}
	return out, nil
}

// SetFileACL sets the owner and a new DACL with SetNamedSecurityInfo: one
// call, so the file is never left between the old and the new list.
func (h *winHost) SetFileACL(ctx context.Context, path string, acl host.ACL) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := acl.Validate(); err != nil {
		return fmt.Errorf("set ACL of %s: %w", path, err)
	}
	d, err := buildDescriptor(acl)
	if err != nil {
		return aclErr("set ACL", path, err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, d.info, d.owner, nil, d.dacl, nil); err != nil {
		return aclErr("set ACL", path, err)
	}
	return nil
}

// descriptor is what SetNamedSecurityInfo gets for an ACL.
type descriptor struct {
	info  windows.SECURITY_INFORMATION
	owner *windows.SID // nil: unchanged
	dacl  *windows.ACL
}

// buildDescriptor turns an ACL into Win32's owner SID and DACL.
func buildDescriptor(acl host.ACL) (descriptor, error) {
	entries := make([]windows.EXPLICIT_ACCESS, 0, len(acl.Entries))
	for _, e := range acl.Entries {
		sid, err := windows.StringToSid(e.SID)
		if err != nil {
			return descriptor{}, fmt.Errorf("SID %s: %w", e.SID, err)
		}
		mode := windows.ACCESS_MODE(windows.GRANT_ACCESS)
		if e.Deny {
			mode = windows.DENY_ACCESS
		}
		entries = append(entries, windows.EXPLICIT_ACCESS{
			AccessPermissions: windows.ACCESS_MASK(e.Mask),
			AccessMode:        mode,
			Inheritance:       windows.NO_INHERITANCE,
			Trustee: windows.TRUSTEE{
				TrusteeForm:  windows.TRUSTEE_IS_SID,
				TrusteeType:  windows.TRUSTEE_IS_UNKNOWN,
				TrusteeValue: windows.TrusteeValueFromSID(sid),
			},
		})
	}
	var d descriptor
	var err error
	if d.dacl, err = windows.ACLFromEntries(entries, nil); err != nil {
		return descriptor{}, err
	}
	d.info = windows.DACL_SECURITY_INFORMATION
	if acl.Protected {
		d.info |= windows.PROTECTED_DACL_SECURITY_INFORMATION
	} else {
		d.info |= windows.UNPROTECTED_DACL_SECURITY_INFORMATION
	}
	if acl.Owner != "" {
		if d.owner, err = windows.StringToSid(acl.Owner); err != nil {
			return descriptor{}, fmt.Errorf("owner %s: %w", acl.Owner, err)
		}
		d.info |= windows.OWNER_SECURITY_INFORMATION
	}
	return d, nil
}

// DescriptorRoundTrip builds, in memory, the security descriptor
// SetFileACL would give a file and reads it back as FileACL reads a
// file's: both conversions, through the same Win32 calls. It is the seam
// the Wine tier tests, because Wine keeps no security descriptor on files
// (SetNamedSecurityInfo succeeds there and a later read shows the
// descriptor Wine derives from the Unix mode).
func DescriptorRoundTrip(acl host.ACL) (host.ACL, error) {
	if err := acl.Validate(); err != nil {
		return host.ACL{}, err
	}
	d, err := buildDescriptor(acl)
	if err != nil {
		return host.ACL{}, err
	}
	sd, err := windows.NewSecurityDescriptor()
	if err != nil {
		return host.ACL{}, err
	}
	if d.owner != nil {
		if err := sd.SetOwner(d.owner, false); err != nil {
			return host.ACL{}, err
		}
	}
	if err := sd.SetDACL(d.dacl, true, false); err != nil {
		return host.ACL{}, err
	}
	if acl.Protected {
		if err := sd.SetControl(windows.SE_DACL_PROTECTED, windows.SE_DACL_PROTECTED); err != nil {
			return host.ACL{}, err
		}
	}
	return readDescriptor(sd)
}

// aclErr is a PathError, so a missing file is fs.ErrNotExist.
func aclErr(op, path string, err error) error {
	if err == windows.ERROR_FILE_NOT_FOUND || err == windows.ERROR_PATH_NOT_FOUND {
		err = fs.ErrNotExist
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}
