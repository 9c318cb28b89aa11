//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/test/harness"
)

// secretPlaybook runs a command on the host that echoes two secrets, each
// embedded in a longer argument or variable, on its stderr and fails: a
// sensitive -var and an inventory variable whose name makes it secret.
const secretPlaybook = `
variable "pw" {
  type      = string
  sensitive = true
}

play "echo" {
  hosts = "windows"

  task "leak" {
    command {
      argv = ["sh", "-c", "echo \"connecting with --password=${var.pw} --retry\" >&2; echo \"token is [$TOKEN]\" >&2; exit 3"]
      env  = { TOKEN = "Bearer ${host.vars.api_token}" }
    }
  }
}
`

// TestSecretsEchoedOverSSH runs a failing command on a simulated host
// through the real sshd and the real wsu binary: its stderr, which quotes
// both secrets inside longer text, must reach no output (human, JSON) and
// no file wsu writes, with the secrets' places replaced.
func TestSecretsEchoedOverSSH(t *testing.T) {
	const pw, token = "S3NT1N3L-ssh-pw-91", "S3NT1N3L-ssh-token-77"
	env := start(t, harness.Options{Hosts: 1})
	inv, err := os.ReadFile(env.Inventory)
	require.NoError(t, err)
	// The file ends in [windows:vars].
	require.NoError(t, os.WriteFile(env.Inventory, append(inv, []byte("api_token="+token+"\n")...), 0o644))
	book := filepath.Join(env.Dir, "echo.hcl")
	require.NoError(t, os.WriteFile(book, []byte(secretPlaybook), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var outputs []string
	var human strings.Builder
	r, err := env.Run(ctx, &human, "apply", book, "-var", "pw="+pw)
	require.NoError(t, err)
	assert.Equal(t, 1, r.ExitCode)
	outputs = append(outputs, r.Stdout, r.Stderr)
	assert.Contains(t, r.Stdout, "connecting with --password=(sensitive) --retry", "the command ran and its stderr is shown, scrubbed")
	assert.Contains(t, r.Stdout, "token is [(sensitive)]", "the env value derived from the token is a secret as a whole")

	r, err = env.RunJSON(ctx, nil, "apply", book, "-var", "pw="+pw)
	require.NoError(t, err)
	outputs = append(outputs, r.Stdout, r.Stderr)
	assert.Contains(t, r.Stdout, "--password=(sensitive) --retry")

	planFile := filepath.Join(env.Dir, "echo.plan")
	r, err = env.Run(ctx, &human, "plan", book, "-var", "pw="+pw, "-out", planFile)
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, r.Stdout+r.Stderr)
	outputs = append(outputs, r.Stdout, r.Stderr)
	saved, err := os.ReadFile(planFile)
	require.NoError(t, err)
	outputs = append(outputs, string(saved))

	for i, o := range outputs {
		assert.NotContains(t, o, pw, "output %d", i)
		assert.NotContains(t, o, token, "output %d", i)
	}
	// Nothing else wsu wrote holds them either: beside the run, or on the
	// host (the agent's files and logs).
	for _, dir := range []string{env.Dir, env.UserDir} {
		noSecretsIn(t, dir, env.Inventory, pw, token)
	}
}

// noSecretsIn greps the files under dir (but skip) for the secrets.
func noSecretsIn(t *testing.T, dir, skip string, secrets ...string) {
	t.Helper()
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || p == skip || fi.Size() > 1<<20 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // sockets, files of other users
		}
		for _, sec := range secrets {
			assert.NotContains(t, string(b), sec, p)
		}
		return nil
	}))
}
