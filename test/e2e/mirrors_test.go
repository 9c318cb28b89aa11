//go:build linux

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/test/harness"
)

// TestJoinWithMirrorsAndTrustedCA: a joined node gets registry mirrors and
// a trusted CA on a later run: one hosts.toml per mirrored registry,
// the CA in the LocalMachine Root store, containerd restarted once; a
// re-run changes nothing and restarts nothing.
//
// This host has Windows Defender (a WinDefend service): join excludes
// containerd's process and directories from its scans, as local policy.
func TestJoinWithMirrorsAndTrustedCA(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		return s.CreateService(context.Background(), host.ServiceConfig{Name: "WinDefend", DisplayName: "Microsoft Defender Antivirus Service",
			BinaryPath: `C:\ProgramData\Microsoft\Windows Defender\platform\MsMpEng.exe`, StartType: host.StartAutomatic})
	}))
	requireSuccess(t, run(t, env, nil, "apply", "join"))
	checkJoined(t, env, h)
	assert.Equal(t, map[string]string{
		`Exclusions\Exclusions_Processes`:                     "REG_DWORD 1",
		`Exclusions\Exclusions_Paths`:                         "REG_DWORD 1",
		`Exclusions\Processes\C:\k\containerd\containerd.exe`: "REG_SZ 0",
		`Exclusions\Paths\C:\ProgramData\containerd`:          "REG_SZ 0",
	}, defenderPolicy(t, env, h), "containerd excluded from Defender's scans where Defender exists")
	if t.Failed() {
		return
	}
	before := servicePIDs(t, env, h)

	caPEM, thumbprint := e2eCA(t)
	vars := filepath.Join(t.TempDir(), "disconnected.tfvars")
	require.NoError(t, os.WriteFile(vars, []byte(`registry_mirrors = {
  "mcr.microsoft.com/oss/kubernetes/pause" = ["mirror.local:5000/windows/oss/kubernetes/pause"]
  "quay.io/org"                            = ["mirror.local:5000/quay/org"]
}
trusted_ca_bundle = <<EOT
`+caPEM+`EOT
`), 0o600))

	r := run(t, env, nil, "apply", "join", "-var-file", vars)
	requireSuccess(t, r)
	changed := r.Changed(h.Name)
	sort.Strings(changed)
	assert.Equal(t, []string{`check-runtime/include.runtime.play["check-runtime"].handler["restart containerd"]`,
		`check-runtime/include.runtime.task["registry mirrors"]`, `check-runtime/include.runtime.task["trusted ca"]`}, changed,
		"only the mirrors, the CA and one containerd restart")
	after := servicePIDs(t, env, h)
	assert.NotEqual(t, before["containerd"], after["containerd"], "containerd restarted to read the mirrors")
	// Its dependents (kubelet) are stopped and started again with it, as
	// the SCM requires; nothing else restarts.
	restarted := map[string]bool{"containerd": true}
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		deps, err := s.DependentServices(context.Background(), "containerd")
		for _, d := range deps {
			restarted[d.Name] = true
		}
		return err
	}))
	assert.True(t, restarted["kubelet"], "kubelet depends on containerd")
	for name, pid := range before {
		if !restarted[name] {
			assert.Equal(t, pid, after[name], "%s did not restart", name)
		}
	}

	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		ctx := context.Background()
		ents, err := s.ReadDir(ctx, `C:\k\containerd\registries`, 0)
		require.NoError(t, err)
		var dirs []string
		for _, e := range ents {
			dirs = append(dirs, e.Name)
		}
		assert.Equal(t, []string{"mcr.microsoft.com", "quay.io"}, dirs)
		pause, err := s.ReadFile(ctx, `C:\k\containerd\registries\mcr.microsoft.com\hosts.toml`, 1<<20)
		require.NoError(t, err)
		assert.Contains(t, string(pause), "server = \"https://mcr.microsoft.com/v2\"\n")
		assert.Contains(t, string(pause), "[host.\"https://mirror.local:5000/v2/windows\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
			"the mirror without the source's path, which containerd appends")
		conf, err := s.ReadFile(ctx, `C:\k\containerd\containerd_conf.toml`, 1<<20)
		require.NoError(t, err)
		assert.Contains(t, string(conf), "config_path = \"C:\\\\k\\\\containerd\\\\registries\"", "containerd reads the directory")
		certs, err := s.Certificates(ctx, "ROOT")
		require.NoError(t, err)
		assert.Contains(t, certs, thumbprint, "the CA is trusted")
		return nil
	}))

	again := run(t, env, nil, "apply", "join", "-var-file", vars)
	requireSuccess(t, again)
	assert.Empty(t, again.Changed(h.Name), "a re-run changes nothing")
	assert.Equal(t, after, servicePIDs(t, env, h), "and restarts nothing")

	// remove takes the exclusions out with containerd; the policy switches
	// stay (other exclusions may use them).
	requireSuccess(t, run(t, env, nil, "apply", "remove"))
	assert.Equal(t, map[string]string{`Exclusions\Exclusions_Processes`: "REG_DWORD 1", `Exclusions\Exclusions_Paths`: "REG_DWORD 1"},
		defenderPolicy(t, env, h), "remove deletes wsu's Defender exclusions")
}

// e2eCA is a fresh CA certificate: PEM and thumbprint.
func e2eCA(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "mirror.local CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), host.Thumbprint(der)
}
