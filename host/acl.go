package host

import (
	"context"
	"fmt"
	"strings"
)

// FileSecurity reads and sets a file's owner and discretionary access list
// (a Windows security descriptor). It exists because some files must be
// writable by administrators only, which no mode bit can say: Windows
// OpenSSH ignores C:\ProgramData\ssh\administrators_authorized_keys unless
// only SYSTEM and Administrators may change it, and granting that through
// icacls strings is locale- and quoting-dependent.
type FileSecurity interface {
	// FileACL describes path's owner and DACL, inherited entries included.
	// A missing path is an error wrapping fs.ErrNotExist.
	FileACL(ctx context.Context, path string) (ACL, error)
	// SetFileACL sets path's owner (when acl.Owner is set) and replaces its
	// explicit entries with acl.Entries, which must not be marked
	// Inherited. With Protected the parent's inheritable entries are
	// dropped, so the entries given are all there is; without it they are
	// inherited again.
	SetFileACL(ctx context.Context, path string, acl ACL) error
}

// Well-known SIDs and access masks the modules use.
const (
	SIDSystem             = "S-1-5-18"
	SIDAdministrators     = "S-1-5-32-544"
	SIDUsers              = "S-1-5-32-545"
	SIDAuthenticatedUsers = "S-1-5-11"

	// FileFullControl is FILE_ALL_ACCESS; FileReadExecute is what icacls
	// calls (RX).
	FileFullControl uint32 = 0x001F01FF
	FileReadExecute uint32 = 0x001200A9
)

// ACL is a file's owner and DACL.
type ACL struct {
	// Owner is the owner's SID (S-1-5-32-544); empty in SetFileACL: leave
	// the owner as it is.
	Owner string `json:"owner,omitempty"`
	// Protected: the DACL inherits nothing from the parent directory.
	Protected bool  `json:"protected"`
	Entries   []ACE `json:"entries"`
}

// ACE is one access control entry.
type ACE struct {
	SID       string `json:"sid"`
	Deny      bool   `json:"deny,omitempty"`
	Mask      uint32 `json:"mask"`
	Inherited bool   `json:"inherited,omitempty"`
}

// AdminsOnlyACL is the ACL Windows OpenSSH wants on the administrators'
// authorized keys: owned by Administrators, inheriting nothing, full
// control for SYSTEM and Administrators and no one else.
func AdminsOnlyACL() ACL {
	return ACL{
		Owner:     SIDAdministrators,
		Protected: true,
		Entries: []ACE{
			{SID: SIDSystem, Mask: FileFullControl},
			{SID: SIDAdministrators, Mask: FileFullControl},
		},
	}
}

// Validate checks an ACL given to SetFileACL.
func (a ACL) Validate() error {
	if a.Owner != "" && !isSID(a.Owner) {
		return fmt.Errorf("owner %q is not a SID (S-1-...)", a.Owner)
	}
	for i, e := range a.Entries {
		switch {
		case !isSID(e.SID):
			return fmt.Errorf("entry %d: %q is not a SID (S-1-...)", i, e.SID)
		case e.Inherited:
			return fmt.Errorf("entry %d (%s): inherited entries come from the parent and cannot be set", i, SIDName(e.SID))
		case e.Mask == 0:
			return fmt.Errorf("entry %d (%s): an empty access mask grants or denies nothing", i, SIDName(e.SID))
		}
	}
	return nil
}

func isSID(s string) bool { return strings.HasPrefix(s, "S-1-") && len(s) > 4 }

// Explicit returns the entries not inherited from the parent.
func (a ACL) Explicit() []ACE {
	var out []ACE
	for _, e := range a.Entries {
		if !e.Inherited {
			out = append(out, e)
		}
	}
	return out
}

// Satisfies reports whether a file with ACL a has exactly what want asks
// for: want's owner (when set), protection and entries, and no others.
// Entry order does not matter.
func (a ACL) Satisfies(want ACL) bool {
	if want.Owner != "" && !strings.EqualFold(a.Owner, want.Owner) {
		return false
	}
	if a.Protected != want.Protected {
		return false
	}
	have := a.Entries
	if !want.Protected {
		have = a.Explicit()
	}
	if len(have) != len(want.Entries) {
		return false
	}
	left := append([]ACE(nil), want.Entries...)
	for _, e := range have {
		i := indexACE(left, e)
		if i < 0 {
			return false
		}
		left = append(left[:i], left[i+1:]...)
	}
	return true
}

func indexACE(list []ACE, e ACE) int {
	for i, x := range list {
		if strings.EqualFold(x.SID, e.SID) && x.Deny == e.Deny && x.Mask == e.Mask && !e.Inherited {
			return i
		}
	}
	return -1
}

// String describes an ACL for a plan: "owner Administrators, protected:
// allow SYSTEM full, allow Administrators full".
func (a ACL) String() string {
	var b strings.Builder
	if a.Owner != "" {
		fmt.Fprintf(&b, "owner %s, ", SIDName(a.Owner))
	}
	if a.Protected {
		b.WriteString("protected: ")
	} else {
		b.WriteString("inheriting: ")
	}
	for i, e := range a.Entries {
		if i > 0 {
			b.WriteString(", ")
		}
		verb := "allow"
		if e.Deny {
			verb = "deny"
		}
		fmt.Fprintf(&b, "%s %s %s", verb, SIDName(e.SID), maskName(e.Mask))
		if e.Inherited {
			b.WriteString(" (inherited)")
		}
	}
	if len(a.Entries) == 0 {
		b.WriteString("no entries")
	}
	return b.String()
}

// SIDName names a well-known SID, or returns the SID.
func SIDName(sid string) string {
	switch strings.ToUpper(sid) {
	case SIDSystem:
		return "SYSTEM"
	case SIDAdministrators:
		return "Administrators"
	case SIDUsers:
		return "Users"
	case SIDAuthenticatedUsers:
		return "Authenticated Users"
	}
	return sid
}

func maskName(m uint32) string {
	switch m {
	case FileFullControl:
		return "full"
	case FileReadExecute:
		return "read"
	}
	return fmt.Sprintf("0x%08X", m)
}
