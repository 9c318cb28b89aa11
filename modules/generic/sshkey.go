package generic

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// SSHKeyCheck proves that a host accepts a private key by logging in with
// it on a second connection, before anything relies on it (rotate-key
// removes the old key only after this passed). Its Plan is the check: a
// check changes nothing, so a host that accepts the key is "ok", and one
// that refuses it fails the task.
type SSHKeyCheck struct{}

var (
	_ modules.Module    = SSHKeyCheck{}
	_ modules.Validator = SSHKeyCheck{}
)

var sshKeyCheckResults = []modules.Attribute{
	{Name: "public_key", Type: cty.String, Description: "The checked key's public half, as an authorized_keys line without comment (`ssh-ed25519 AAAA...`)."},
	{Name: "fingerprint", Type: cty.String, Description: "Its SHA256 fingerprint, as `ssh-keygen -l` prints it (`SHA256:...`)."},
	{Name: "login_public_key", Type: cty.String, Description: "The public key the task's own connection logged in with; null when it used none wsu can name (a password, an ssh-agent, WinRM, local)."},
	{Name: "login_fingerprint", Type: cty.String, Description: "Its SHA256 fingerprint; null with `login_public_key`."},
}

// The SSH transport's variables the check replaces: only the key may log
// in, and a refusal must not be retried for minutes as a host still
// booting would be. transport/ssh's tests pin these names.
var (
	// SSHKeyCheckCleared are removed from the second connection's variables.
	SSHKeyCheckCleared = []string{
		"private_key_file", "ansible_ssh_private_key_file", "ansible_private_key_file",
		"ansible_password", "ansible_ssh_pass", "ansible_ssh_password",
		"ansible_connection",
	}
)

// SSHKeyCheckVars are the variables the second connection is dialled with
// in place of the host's.
func SSHKeyCheckVars(privateKey string) map[string]cty.Value {
	vars := map[string]cty.Value{
		"connection":        cty.StringVal("ssh"),
		"ssh_private_key":   cty.StringVal(privateKey),
		"auth_retry_window": cty.StringVal("0s"),
	}
	for _, name := range SSHKeyCheckCleared {
		vars[name] = cty.NullVal(cty.String)
	}
	return vars
}

func (SSHKeyCheck) Schema() modules.Schema {
	return modules.Schema{
		Name:    "ssh_key_check",
		Summary: "Prove a host accepts an SSH private key by logging in with it on a second connection.",
		Description: "Opens a second SSH connection to the task's host with the inventory's settings " +
			"(address, port, user, known hosts, proxy_jump) but only `private_key` to log in: no key file, " +
			"password or ssh-agent, and no retries of a refusal. The check is the plan: a host that " +
			"accepts the key is `ok`, one that refuses it fails the task with the server's answer. In a " +
			"plan with changes pending before it (the key is about to be authorized) it shows `!` and " +
			"checks nothing. The results name the checked key and the key the task's own connection " +
			"logged in with, so a playbook can tell whether it still runs on the old key " +
			"(`wsu:rotate-key` removes that one next).",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "private_key", Type: cty.String, Required: true, Sensitive: true,
				Description: "The private key (OpenSSH or PEM text, unencrypted) to log in with."},
		},
		Results: sshKeyCheckResults,
		Example: `task "new_key_works" {
  ssh_key_check {
    private_key = var.new_private_key
  }
}`,
	}
}

func (SSHKeyCheck) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	key, ok := modutil.Str(modutil.Get(cfg, "private_key"))
	if !ok {
		return nil
	}
	if _, err := parsePrivateKey(key); err != nil {
		return hcl.Diagnostics{cfg.Error("private_key", "Invalid private key", err.Error())}
	}
	return nil
}

// parsePrivateKey reads a private key; errors never quote it.
func parsePrivateKey(text string) (gossh.Signer, error) {
	s, err := gossh.ParsePrivateKey([]byte(text))
	var missing *gossh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, errors.New("the key is encrypted; ssh_key_check needs it unencrypted (ssh-keygen -p -N \"\" -f FILE)")
	case err != nil:
		return nil, fmt.Errorf("not an OpenSSH or PEM private key: %v", err)
	}
	return s, nil
}

// keyStrings are a public key's authorized_keys form and fingerprint.
func keyStrings(k gossh.PublicKey) (line, fingerprint cty.Value) {
	if k == nil {
		return cty.NullVal(cty.String), cty.NullVal(cty.String)
	}
	return cty.StringVal(strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))), cty.StringVal(gossh.FingerprintSHA256(k))
}

// loginKey is the key the task's connection logged in with, when known.
func loginKey(h host.Host) gossh.PublicKey {
	ka, ok := h.(host.KeyAuthenticated)
	if !ok || ka.LoginPublicKey() == "" {
		return nil
	}
	k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(ka.LoginPublicKey()))
	if err != nil {
		return nil
	}
	return k
}

func (SSHKeyCheck) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	loginLine, loginFP := keyStrings(loginKey(req.Host))
	key, ok := modutil.Str(modutil.Get(cfg, "private_key"))
	if !ok {
		res := modutil.Result(sshKeyCheckResults, map[string]cty.Value{
			"public_key": cty.UnknownVal(cty.String), "fingerprint": cty.UnknownVal(cty.String),
			"login_public_key": loginLine, "login_fingerprint": loginFP})
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Run, Subject: "log in with a key " + knownAfterApply}}
	}
	signer, err := parsePrivateKey(key)
	if err != nil {
		return modules.PlanResponse{Result: modutil.UnknownResult(sshKeyCheckResults), Diagnostics: hcl.Diagnostics{cfg.Error("private_key", "Invalid private key", err.Error())}}
	}
	line, fp := keyStrings(signer.PublicKey())
	res := modutil.Result(sshKeyCheckResults, map[string]cty.Value{
		"public_key": line, "fingerprint": fp, "login_public_key": loginLine, "login_fingerprint": loginFP})
	subject := "log in with " + fp.AsString()
	if req.Pending {
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Run, Subject: subject}}
	}
	if diags := check(ctx, req.Redial, cfg, key, fp.AsString()); diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	return modules.PlanResponse{Result: res}
}

// check logs in on a second connection with only the key.
func check(ctx context.Context, redial modules.Redialer, cfg modules.Config, key, fp string) hcl.Diagnostics {
	if redial == nil {
		return hcl.Diagnostics{cfg.Error("private_key", "Cannot open a second connection",
			"This run has no way to connect to the host again (wsu used as a library without a connector).")}
	}
	h, err := redial(ctx, SSHKeyCheckVars(key))
	if err != nil {
		return hcl.Diagnostics{cfg.Error("private_key", "The host refuses the key",
			fmt.Sprintf("Logging in with %s on a second connection failed: %v. Nothing that relies on the key was done; "+
				"check that the host's sshd reads the file the key was added to (for administrators: %s) and that its ACL lets only SYSTEM and Administrators change it.",
				fp, err, `C:\ProgramData\ssh\administrators_authorized_keys`))}
	}
	h.Close()
	return nil
}

// Apply never runs for a passed check (its plan has no change); in a
// plan's pending case the engine plans again before applying, so this
// only repeats the check.
func (m SSHKeyCheck) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	pr := m.Plan(ctx, modules.PlanRequest{Config: req.Config, Host: req.Host, Redial: req.Redial})
	return modules.ApplyResponse{Result: pr.Result, Diagnostics: pr.Diagnostics}
}
