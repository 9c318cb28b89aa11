package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestACLSatisfies(t *testing.T) {
	want := AdminsOnlyACL()
	reordered := ACL{Owner: "s-1-5-32-544", Protected: true, Entries: []ACE{want.Entries[1], want.Entries[0]}}
	tests := []struct {
		name string
		have ACL
		ok   bool
	}{
		{"exact", want, true},
		{"entry order and SID case do not matter", reordered, true},
		{"inheriting", ACL{Owner: SIDAdministrators, Entries: want.Entries}, false},
		{"another owner", ACL{Owner: SIDUsers, Protected: true, Entries: want.Entries}, false},
		{"an extra reader", ACL{Owner: SIDAdministrators, Protected: true, Entries: append(append([]ACE{}, want.Entries...), ACE{SID: SIDUsers, Mask: FileReadExecute})}, false},
		{"less than full control", ACL{Owner: SIDAdministrators, Protected: true, Entries: []ACE{{SID: SIDSystem, Mask: FileFullControl}, {SID: SIDAdministrators, Mask: FileReadExecute}}}, false},
		{"a deny instead of an allow", ACL{Owner: SIDAdministrators, Protected: true, Entries: []ACE{{SID: SIDSystem, Mask: FileFullControl}, {SID: SIDAdministrators, Mask: FileFullControl, Deny: true}}}, false},
		{"one entry twice", ACL{Owner: SIDAdministrators, Protected: true, Entries: []ACE{want.Entries[0], want.Entries[0]}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.ok, tt.have.Satisfies(want), "%s", tt.have)
		})
	}
	// Unprotected wants compare the explicit entries: inherited ones come
	// from the parent.
	users := ACL{Entries: []ACE{{SID: SIDUsers, Mask: FileFullControl}}}
	have := ACL{Entries: []ACE{{SID: SIDUsers, Mask: FileFullControl}, {SID: SIDSystem, Mask: FileFullControl, Inherited: true}}}
	assert.True(t, have.Satisfies(users))
	assert.Equal(t, "inheriting: allow Users full, allow SYSTEM full (inherited)", have.String())
	assert.Equal(t, "owner Administrators, protected: allow SYSTEM full, allow Administrators full", want.String())
}

func TestACLValidate(t *testing.T) {
	assert.NoError(t, AdminsOnlyACL().Validate())
	assert.ErrorContains(t, ACL{Owner: "Administrators"}.Validate(), "not a SID")
	assert.ErrorContains(t, ACL{Entries: []ACE{{SID: "Everyone", Mask: 1}}}.Validate(), "not a SID")
	assert.ErrorContains(t, ACL{Entries: []ACE{{SID: SIDUsers, Mask: 1, Inherited: true}}}.Validate(), "inherited")
	assert.ErrorContains(t, ACL{Entries: []ACE{{SID: SIDUsers}}}.Validate(), "empty access mask")
}
