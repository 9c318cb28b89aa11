package engine_test

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
)

func TestScrubberReplacesInsideLongerText(t *testing.T) {
	s := engine.NewScrubber()
	s.Add("hunter22")
	assert.Equal(t, "login --password=(sensitive) --verbose", s.Scrub("login --password=hunter22 --verbose"))
	assert.Equal(t, "a (sensitive) b", s.Scrub("a hunter22hunter22 b"), "adjacent ones merge")
	assert.Equal(t, "nothing here", s.Scrub("nothing here"))
}

func TestScrubberMergesOverlappingSecrets(t *testing.T) {
	s := engine.NewScrubber()
	s.Add("abcdef")
	s.Add("defghi")
	s.Add("xyz-abcdef-long") // one secret inside another
	assert.Equal(t, "<(sensitive)>", s.Scrub("<abcdefghi>"), "no part of either is left")
	assert.Equal(t, "[(sensitive)]", s.Scrub("[xyz-abcdef-long]"))
}

func TestScrubberForms(t *testing.T) {
	s := engine.NewScrubber()
	s.Add("-----BEGIN-----\nline-one-of-key\r\nline-two-of-key\n-----END-----")
	s.Add(`quo"te\back`)
	// Each line alone, whatever the line endings around it.
	assert.Equal(t, "got (sensitive)\r\n", s.Scrub("got line-two-of-key\r\n"))
	// Quoted by %q or JSON: escaped quotes and backslashes.
	assert.Equal(t, `cannot use "(sensitive)"`, s.Scrub(`cannot use "quo\"te\\back"`))
}

func TestScrubberIgnoresShortTexts(t *testing.T) {
	s := engine.NewScrubber()
	s.Add("abc")
	s.Add("   ")
	s.Add("a\nb\nlong-enough")
	assert.Equal(t, "abc b (sensitive)", s.Scrub("abc b long-enough"), "shorter than MinSecret: left alone")
}

func TestScrubberValues(t *testing.T) {
	s := engine.NewScrubber()
	s.AddMarked(cty.ObjectVal(map[string]cty.Value{
		"user": cty.StringVal("administrator"),
		"pass": cty.StringVal("marked-secret").Mark(engine.Sensitive),
		"keys": cty.ListVal([]cty.Value{cty.StringVal("in-a-marked-list")}).Mark(engine.Sensitive),
	}))
	assert.Equal(t, "administrator (sensitive) (sensitive)", s.Scrub("administrator marked-secret in-a-marked-list"))
}

func TestScrubberDiagnosticsDropValues(t *testing.T) {
	s := engine.NewScrubber()
	s.Add("hunter22")
	d := &hcl.Diagnostic{Summary: "bad hunter22", Detail: "x hunter22 y", EvalContext: &hcl.EvalContext{}}
	out := s.Diagnostics(hcl.Diagnostics{d})
	assert.Equal(t, "bad (sensitive)", out[0].Summary)
	assert.Equal(t, "x (sensitive) y", out[0].Detail)
	assert.Nil(t, out[0].EvalContext, "the values an expression saw go")
	assert.Equal(t, "bad hunter22", d.Summary, "the original is left alone")
}

func TestCollectSecrets(t *testing.T) {
	pb := &playbook.Playbook{Variables: map[string]*playbook.Variable{
		"pw":     {Name: "pw", Type: cty.String, Sensitive: true, Default: cty.StringVal("default-secret")},
		"region": {Name: "region", Type: cty.String},
		"keys":   {Name: "keys", Type: cty.Map(cty.String), Sensitive: true},
	}}
	inv := inventory.FromList("win01,")
	inv.Hosts["win01"].Vars["ansible_become_password"] = inventory.Var{Value: cty.StringVal("become-secret")}
	inv.Hosts["win01"].Vars["pw"] = inventory.Var{Value: cty.StringVal("inventory-pw")}
	inv.Hosts["win01"].Vars["ansible_ssh_private_key_file"] = inventory.Var{Value: cty.StringVal("/home/u/.ssh/id")}
	inv.Groups["all"].Vars["byoh_key"] = inventory.Var{Value: cty.StringVal("marked-in-inventory").Mark(engine.Sensitive)}
	inv.Groups["all"].Vars["site"] = inventory.Var{Value: cty.StringVal("plain-site")}
	s := engine.NewScrubber()
	engine.CollectSecrets(s, pb, inv, engine.Inputs{
		Vars:    []string{"pw=cli-secret", "region=eu-west-1", `keys={ a = "typed-secret" }`},
		Environ: []string{"WSU_VAR_pw=env-secret", "WSU_VAR_region=us-east"},
	})
	for _, sec := range []string{"default-secret", "become-secret", "inventory-pw", "marked-in-inventory", "cli-secret", "env-secret", "typed-secret"} {
		assert.True(t, s.Contains("x "+sec+" y"), sec)
	}
	for _, plain := range []string{"eu-west-1", "us-east", "plain-site", "/home/u/.ssh/id"} {
		assert.False(t, s.Contains(plain), plain)
	}
}
