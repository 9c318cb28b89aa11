package setup_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/setup"
)

// sampleRequest is a request as a controller makes it for a site playbook:
// its one local host, a var file, a -var from a Secret, the private key in
// the inventory, confined, salted and held to a plan hash.
func sampleRequest(t testing.TB, dir string) setup.Request {
	site := filepath.Join(dir, "site")
	require.NoError(t, os.MkdirAll(site, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(site, "playbook.hcl"), []byte(secretPrintPlaybook), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(site, "notes.txt"), []byte("notes"), 0o600))
	varFile := filepath.Join(dir, "cluster.wsuvars")
	require.NoError(t, os.WriteFile(varFile, []byte(`greeting = "hello"`+"\n"), 0o600))
	inv := inventory.Local("windows")
	h := inv.Hosts["localhost"]
	h.Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
	h.Vars["ansible_port"] = inventory.Var{Value: cty.NumberIntVal(2222)}
	h.Vars["labels"] = inventory.Var{Value: cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})}
	h.Vars["ansible_ssh_private_key"] = inventory.Var{Value: cty.StringVal("PRIVATE KEY").Mark(engine.Sensitive)}
	return setup.Request{
		Mode:       engine.ModeApply,
		Inputs:     planfile.Inputs{Playbook: filepath.Join(site, "playbook.hcl"), VarFiles: []string{varFile}, Vars: []string{"token=hunter2", "who=world"}, Limit: "all"},
		Inventory:  inv,
		Forks:      3,
		SecretVars: []string{"token"},
		Confined:   true,
		ReadDirs:   []string{dir},
		Salt:       []byte{1, 2, 3, 4},
		ExpectHash: "0123456789abcdef0123456789abcdef",
		SecretFiles: setup.SecretFiles{
			HostVars: map[string]string{"ansible_ssh_private_key": "/var/run/wsu/secrets/key"},
			Vars:     map[int]string{0: "/var/run/wsu/secrets/token"},
		},
	}
}

const secretPrintPlaybook = `
variable "greeting" {
  type = string
}
variable "who" {
  type = string
}
variable "token" {
  type = string
}

play "hello" {
  hosts = "all"

  task "say" {
    print { msg = "${var.greeting}, ${var.who}" }
  }
}
`

// TestRequestRoundTrip: a request packed, encoded, decoded and unpacked on
// another machine is the same run: every field, the inventory's typed
// values and groups, the files by content; the secrets are not in the
// JSON but read from their files when unpacked, sensitive; and the
// unpacked request runs.
func TestRequestRoundTrip(t *testing.T) {
	req := sampleRequest(t, t.TempDir())
	packed, err := req.Pack()
	require.NoError(t, err)
	data, err := packed.Encode()
	require.NoError(t, err)
	for _, secret := range []string{"PRIVATE KEY", "hunter2"} {
		assert.NotContains(t, string(data), secret, "a request carries no secret")
	}
	assert.True(t, strings.HasPrefix(string(data), `{"apiVersion":"`+setup.RequestVersion+`"`), "%.80s", data)

	got, err := setup.DecodeRequest(data)
	require.NoError(t, err)
	assert.Equal(t, req.Mode, got.Mode)
	assert.Equal(t, req.Forks, got.Forks)
	assert.Equal(t, req.SecretVars, got.SecretVars)
	assert.Equal(t, req.Confined, got.Confined)
	assert.Equal(t, req.ReadDirs, got.ReadDirs)
	assert.Equal(t, req.Salt, got.Salt)
	assert.Equal(t, req.ExpectHash, got.ExpectHash)
	assert.Equal(t, req.SecretFiles, got.SecretFiles)
	assert.Equal(t, "all", got.Limit)
	assert.Equal(t, []string{"token=", "who=world"}, got.Vars, "the secret -var's value is in its file")
	assert.Equal(t, "playbook.hcl", got.Playbook)
	require.NotNil(t, got.Files)
	assert.Equal(t, map[string]string{"playbook.hcl": secretPrintPlaybook, "notes.txt": "notes"}, got.Files.Playbook)
	assert.Equal(t, []setup.File{{Name: "cluster.wsuvars", Data: `greeting = "hello"` + "\n"}}, got.Files.VarFiles)
	gh := got.Inventory.Hosts["localhost"]
	require.NotNil(t, gh)
	assert.NotContains(t, gh.Vars, "ansible_ssh_private_key")
	for _, name := range []string{"connection", "ansible_port", "labels"} {
		assert.True(t, req.Inventory.Hosts["localhost"].Vars[name].Value.RawEquals(gh.Vars[name].Value), name)
	}
	assert.Equal(t, req.Inventory.Order, got.Inventory.Order)
	assert.Equal(t, req.Inventory.Hosts["localhost"].Groups, gh.Groups)
	assert.Equal(t, req.Inventory.Groups["windows"].Hosts, got.Inventory.Groups["windows"].Hosts)

	// On the other machine: the secrets in their files.
	secrets := t.TempDir()
	got.SecretFiles.HostVars["ansible_ssh_private_key"] = filepath.Join(secrets, "key")
	got.SecretFiles.Vars[0] = filepath.Join(secrets, "token")
	require.NoError(t, os.WriteFile(got.SecretFiles.HostVars["ansible_ssh_private_key"], []byte("PRIVATE KEY"), 0o600))
	require.NoError(t, os.WriteFile(got.SecretFiles.Vars[0], []byte("hunter2"), 0o600))
	work := t.TempDir()
	run, err := got.Unpack(work)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(work, "playbook", "playbook.hcl"), run.Playbook)
	assert.Equal(t, []string{"token=hunter2", "who=world"}, run.Vars)
	key := run.Inventory.Hosts["localhost"].Vars["ansible_ssh_private_key"].Value
	assert.True(t, key.HasMark(engine.Sensitive), "a secret read from its file is sensitive")
	k, _ := key.Unmark()
	assert.Equal(t, "PRIVATE KEY", k.AsString())
	require.Len(t, run.VarFiles, 1)
	vf, err := os.ReadFile(run.VarFiles[0])
	require.NoError(t, err)
	assert.Equal(t, `greeting = "hello"`+"\n", string(vf))

	run.Mode, run.ExpectHash = engine.ModePlan, ""
	prepared, diags := setup.Prepare(context.Background(), setup.Options{Request: run})
	require.False(t, diags.HasErrors(), "%v", diags)
	res := engine.Run(context.Background(), prepared.Request)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.NotEmpty(t, res.PlanHash)
}

// TestRequestHeldToItsHash: an apply held to a plan hash (the one a plan
// of the same request made) applies; held to another, it applies nothing
// and says the plan changed.
func TestRequestHeldToItsHash(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.txt")
	book := filepath.Join(dir, "book.hcl")
	require.NoError(t, os.WriteFile(book, []byte(`
play "p" {
  hosts = "all"
  task "t" {
    file {
      path    = "`+filepath.ToSlash(out)+`"
      content = "held"
    }
  }
}
`), 0o600))
	run := func(mode engine.Mode, hash string) *engine.Result {
		inv := inventory.Local("windows")
		inv.Hosts["localhost"].Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
		req := setup.Request{Mode: mode, Inputs: planfile.Inputs{Playbook: book}, Inventory: inv, Salt: []byte("instance salt"), ExpectHash: hash}
		prepared, diags := setup.Prepare(context.Background(), setup.Options{Request: req})
		require.False(t, diags.HasErrors(), "%v", diags)
		return engine.Run(context.Background(), prepared.Request)
	}
	plan := run(engine.ModePlan, "")
	require.False(t, plan.Failed(), "%v", plan.Diagnostics)
	require.Len(t, plan.PlanHash, 32)
	assert.Equal(t, plan.PlanHash, run(engine.ModePlan, "").PlanHash, "the same state under the same salt, the same hash")

	other := run(engine.ModeApply, strings.Repeat("0", 32))
	require.True(t, other.Failed())
	assert.Contains(t, other.Diagnostics.Error(), "changed since it was approved")
	assert.NoFileExists(t, out, "nothing was applied")

	held := run(engine.ModeApply, plan.PlanHash)
	require.False(t, held.Failed(), "%v", held.Diagnostics)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "held", string(data))
}

// TestEncodeRefusesSecrets: a sensitive inventory value the request does
// not leave to a file, or the value of a secret -var, is never written;
// the error names the variable, not its value.
func TestEncodeRefusesSecrets(t *testing.T) {
	req := sampleRequest(t, t.TempDir())
	req.SecretFiles.HostVars = nil
	_, err := req.Encode()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ansible_ssh_private_key")
	assert.NotContains(t, err.Error(), "PRIVATE KEY")

	req = sampleRequest(t, t.TempDir())
	req.SecretFiles.Vars = nil
	_, err = req.Encode()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "token")
	assert.NotContains(t, err.Error(), "hunter2")
}

// TestDecodeRequestLocatesErrors: every refusal says where: the line and
// column of bad JSON or of a value of the wrong type, else the field.
func TestDecodeRequestLocatesErrors(t *testing.T) {
	good := func(edit func(string) string) []byte {
		req := sampleRequest(t, t.TempDir())
		packed, err := req.Pack()
		require.NoError(t, err)
		data, err := packed.Encode()
		require.NoError(t, err)
		return []byte(edit(string(data)))
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"syntax", []byte("{\n  \"apiVersion\": \"" + setup.RequestVersion + "\",\n  \"mode\": plan\n}"), "line 3, column 11"},
		{"type", []byte("{\"apiVersion\": \"" + setup.RequestVersion + "\",\n\"forks\": \"three\"}"), "line 2, column 17: forks: a JSON string where int belongs"},
		{"empty", nil, "empty or cut short"},
		{"cut short", []byte(`{"apiVersion": "`), "empty or cut short"},
		{"trailing", []byte(`{"apiVersion": "x"} {}`), "line 1, column 21: more after the request's end"},
		{"unknown field", []byte(`{"apiVersion": "` + setup.RequestVersion + `", "mode": "plan", "bogus": 1}`), `unknown field "bogus"`},
		{"version", good(func(s string) string { return strings.Replace(s, setup.RequestVersion, "wsu.dev/run-request/v0", 1) }), `apiVersion "wsu.dev/run-request/v0"`},
		{"mode", good(func(s string) string { return strings.Replace(s, `"mode":"apply"`, `"mode":"destroy"`, 1) }), `mode "destroy"`},
		{"hash on a plan", good(func(s string) string { return strings.Replace(s, `"mode":"apply"`, `"mode":"plan"`, 1) }), "expectHash"},
		{"salt", good(func(s string) string { return strings.Replace(s, `"salt":"01020304"`, `"salt":"zz"`, 1) }), "salt: not hex"},
		{"path as file name", good(func(s string) string { return strings.Replace(s, `"notes.txt"`, `"../notes.txt"`, 1) }), `files: playbook["../notes.txt"]: a file's name, not a path`},
		{"secret var index", good(func(s string) string { return strings.Replace(s, `"vars":{"0":`, `"vars":{"7":`, 1) }), "secretFiles: vars[7]: there are 2 -var options"},
		{"secret value", good(func(s string) string { return strings.Replace(s, `"token="`, `"token=x"`, 1) }), "secretFiles: vars[0]: inputs.vars[0] is not NAME="},
		{"inventory", good(func(s string) string { return strings.Replace(s, `"order":["localhost"]`, `"order":["nobody"]`, 1) }), `inventory: order: host "nobody" is not among the hosts`},
		{"inventory value", good(func(s string) string { return strings.Replace(s, `"value":2222`, `"value":"port"`, 1) }), "inventory: host localhost: variable ansible_port: value:"},
		{"marked", good(func(s string) string {
			return strings.Replace(s, `"value":2222`, `"value":2222,"marks":["sensitive"]`, 1)
		}), "inventory: host localhost: variable ansible_port is sensitive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := setup.DecodeRequest(tc.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
