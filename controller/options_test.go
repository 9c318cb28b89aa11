package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// TestDefaultApproval: --default-approval takes Auto or Manual in any case;
// Options refuse another value before anything starts.
func TestDefaultApproval(t *testing.T) {
	for flag, want := range map[string]wsuv1.Approval{"Manual": wsuv1.ApprovalManual, "manual": wsuv1.ApprovalManual, "AUTO": wsuv1.ApprovalAuto} {
		got, err := ParseApproval(flag)
		require.NoError(t, err, flag)
		assert.Equal(t, want, got, flag)
	}
	_, err := ParseApproval("Approve")
	assert.ErrorContains(t, err, `"Approve" is neither Auto nor Manual`)

	o := Options{StateDir: t.TempDir(), DefaultApproval: "manual"}
	o.defaults()
	assert.ErrorContains(t, o.check(), `default approval "manual"`)
	o.DefaultApproval = wsuv1.ApprovalManual
	assert.NoError(t, o.check())
}
