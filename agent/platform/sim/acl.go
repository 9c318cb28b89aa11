package sim

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/wsu-project/wsu/host"
)

// aclRecord is an ACL set on a file. It belongs to the file the path held
// then (its inode): a write renames a new file over the path, and on
// Windows the new file takes the directory's inherited ACL, not the old
// file's, so a record for another inode no longer applies.
type aclRecord struct {
	Inode uint64   `json:"inode"`
	ACL   host.ACL `json:"acl"`
}

// aclTable is keyed by the file's local path, lower-cased.
type aclTable struct {
	Files map[string]*aclRecord `json:"files"`
}

func (t *tx) acls() (*aclTable, error) {
	a, err := table[aclTable](t, tACLs)
	if err == nil && a.Files == nil {
		a.Files = map[string]*aclRecord{}
	}
	return a, err
}

// inheritedACL is what a file gets from C:\ProgramData and most
// directories: owner Administrators, full control for SYSTEM and
// Administrators, read for Users, all inherited.
func inheritedACL() host.ACL {
	return host.ACL{
		Owner: host.SIDAdministrators,
		Entries: []host.ACE{
			{SID: host.SIDSystem, Mask: host.FileFullControl, Inherited: true},
			{SID: host.SIDAdministrators, Mask: host.FileFullControl, Inherited: true},
			{SID: host.SIDUsers, Mask: host.FileReadExecute, Inherited: true},
		},
	}
}

// FileACL reports the ACL last set on the file, or the inherited one.
func (h *Host) FileACL(ctx context.Context, path string) (host.ACL, error) {
	if err := ctx.Err(); err != nil {
		return host.ACL{}, err
	}
	lp, ino, err := h.aclFile(path)
	if err != nil {
		return host.ACL{}, err
	}
	var acl host.ACL
	err = h.view(func(t *tx) error {
		tab, err := t.acls()
		if err != nil {
			return err
		}
		acl = effectiveACL(tab.Files[aclKey(lp)], ino)
		return nil
	})
	return acl, err
}

// SetFileACL records the ACL for the file the path holds now.
func (h *Host) SetFileACL(ctx context.Context, path string, acl host.ACL) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := acl.Validate(); err != nil {
		return fmt.Errorf("set ACL of %s: %w", path, err)
	}
	lp, ino, err := h.aclFile(path)
	if err != nil {
		return err
	}
	return h.update(func(t *tx) error {
		tab, err := t.acls()
		if err != nil {
			return err
		}
		old := effectiveACL(tab.Files[aclKey(lp)], ino)
		if acl.Owner == "" {
			acl.Owner = old.Owner
		}
		acl.Entries = append([]host.ACE(nil), acl.Entries...)
		tab.Files[aclKey(lp)] = &aclRecord{Inode: ino, ACL: acl}
		t.mark(tACLs)
		return nil
	})
}

// effectiveACL is the recorded ACL, if it is the file's, plus the
// inherited entries unless it is protected.
func effectiveACL(rec *aclRecord, ino uint64) host.ACL {
	if rec == nil || rec.Inode != ino {
		return inheritedACL()
	}
	acl := rec.ACL
	acl.Entries = append([]host.ACE(nil), acl.Entries...)
	if !acl.Protected {
		acl.Entries = append(acl.Entries, inheritedACL().Entries...)
	}
	return acl
}

// aclFile resolves path to an existing local file and its inode.
func (h *Host) aclFile(path string) (string, uint64, error) {
	lp, err := h.LocalPath(path)
	if err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(lp)
	if err != nil {
		return "", 0, pathErr("acl", path, err)
	}
	return lp, inode(fi), nil
}

func aclKey(lp string) string { return strings.ToLower(lp) }
