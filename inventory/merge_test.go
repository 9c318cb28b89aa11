package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Several -i merge as Ansible's do: hosts in order of first appearance,
// groups the union of their sources, a later source's variable over an
// earlier one's, each keeping where it was set.
func TestMergeInOrder(t *testing.T) {
	a, diags := ParseINI("a.ini", []byte("[windows]\nwin01 ansible_port=5986\nwin02\n\n[windows:vars]\nansible_user=admin\nproxy=http://a\n"))
	require.False(t, diags.HasErrors(), diags)
	b, diags := ParseINI("b.ini", []byte("[windows]\nwin03\n\n[workers]\nwin01 ansible_port=2222\n\n[windows:vars]\nproxy=http://b\n\n[workers:children]\nwindows\n"))
	require.False(t, diags.HasErrors(), diags)
	inv, diags := Merge(a, b)
	require.False(t, diags.HasErrors(), diags)

	assert.Equal(t, []string{"win01", "win02", "win03"}, inv.Order)
	assert.Equal(t, []string{"win01", "win02", "win03"}, inv.Groups["windows"].Hosts)
	assert.Equal(t, []string{"windows"}, inv.Groups["workers"].Children)
	assert.Equal(t, "a.ini, b.ini", inv.Source)

	v := inv.HostVars("win01")
	assert.Equal(t, "2222", v["ansible_port"].Value.AsString(), "the later source's host var")
	assert.Equal(t, "b.ini", v["ansible_port"].Range.Filename)
	assert.Equal(t, "http://b", v["proxy"].Value.AsString(), "the later source's group var")
	assert.Equal(t, "admin", v["ansible_user"].Value.AsString(), "an earlier var not set again stays")
	hosts, err := inv.Match("workers")
	require.NoError(t, err)
	assert.Equal(t, []string{"win01", "win02", "win03"}, hosts, "workers' children came from b, its hosts from both")

	// An inline list host that a file puts in a group leaves "ungrouped".
	c := FromList("win02,win09,")
	inv, diags = Merge(c, a)
	require.False(t, diags.HasErrors(), diags)
	assert.Equal(t, []string{"win09"}, inv.Groups["ungrouped"].Hosts)
	assert.Equal(t, []string{"win02", "win09", "win01"}, inv.Order)
}

// An inline list expands ranges as INI and YAML inventories do, and
// refuses one it cannot expand, naming the entry.
func TestParseListRanges(t *testing.T) {
	inv, diags := ParseList("win[1:3],db01:2222,")
	require.False(t, diags.HasErrors(), diags)
	assert.Equal(t, []string{"win1", "win2", "win3", "db01"}, inv.Order)
	assert.Equal(t, "2222", inv.Hosts["db01"].Vars["ansible_port"].Value.AsString())

	inv, diags = ParseList("win[01:03]:5986,")
	require.False(t, diags.HasErrors(), diags)
	assert.Equal(t, []string{"win01", "win02", "win03"}, inv.Order)
	assert.Equal(t, "5986", inv.Hosts["win02"].Vars["ansible_port"].Value.AsString())

	for list, want := range map[string]string{
		"win[1:x],":  `In the inline host list -i "win[1:x],", entry "win[1:x]":`,
		"win[1:3,":   `entry "win[1:3": The range in "win[1:3" has no closing ']'`,
		"win[3:1],":  `entry "win[3:1]"`,
		"win]1],ok,": `entry "win]1]"`,
	} {
		_, diags := ParseList(list)
		require.True(t, diags.HasErrors(), list)
		assert.Contains(t, diags[0].Detail, want, list)
	}
}
