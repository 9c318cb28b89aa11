package image

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// StageOptions say how Stage builds the context.
type StageOptions struct {
	// Repo is the wsu repository's root (the Go module).
	Repo string
	// Version is stamped into wsu and its agents (version.Version), as
	// make build does.
	Version string
	// CABundle is the CA bundle copied into the image (default
	// DefaultCABundle: the build machine's, from Debian's ca-certificates).
	CABundle string
	// Go is the go command (default "go").
	Go string
	// Log receives the commands run (may be nil).
	Log io.Writer
}

// DefaultCABundle is the build machine's CA bundle (Debian and Ubuntu's
// ca-certificates package; Fedora has it at
// /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem).
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// agentPlatforms are the node agents wsu carries (the Makefile's
// AGENT_PLATFORMS): the Windows one is what wsu deploys to nodes.
func agentPlatforms() [][2]string { return [][2]string{{"windows", "amd64"}, {"linux", "amd64"}} }

// Stage writes the wsu image's build context into dir: a static
// linux/amd64 wsu and wsu-controller carrying the node agents (built as make build does, with
// -tags wsu_embed_agents, but with CGO off, -trimpath and stripped, so the
// same commit gives the same bytes), the CA bundle, passwd and group. Both
// make image and the Dockerfile build from it.
func Stage(ctx context.Context, dir string, o StageOptions) error {
	o.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "wsu-image-stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	overlay, err := o.buildAgents(ctx, work)
	if err != nil {
		return err
	}
	for _, b := range [][2]string{{CtxWSU, "./cmd/wsu"}, {CtxWSUController, "./cmd/wsu-controller"}} {
		if err := o.goBuild(ctx, "linux", "amd64", filepath.Join(dir, b[0]), b[1],
			"-tags", "wsu_embed_agents", "-overlay", overlay); err != nil {
			return err
		}
	}
	if err := copyFile(o.CABundle, filepath.Join(dir, CtxCABundle)); err != nil {
		return fmt.Errorf("CA bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CtxPasswd), []byte(Passwd()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, CtxGroup), []byte(Group()), 0o644)
}

func (o *StageOptions) defaults() {
	if o.Go == "" {
		o.Go = "go"
	}
	if o.CABundle == "" {
		o.CABundle = DefaultCABundle
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// buildAgents cross-builds the node agents into work and returns a go build
// -overlay file that places them where cmd/internal/agents' //go:embed
// looks: the embed sees them, the source tree is not touched.
func (o *StageOptions) buildAgents(ctx context.Context, work string) (string, error) {
	replace := map[string]string{}
	for _, p := range agentPlatforms() {
		name := "wsu-agent-" + p[0] + "-" + p[1]
		if p[0] == "windows" {
			name += ".exe"
		}
		out := filepath.Join(work, name)
		if err := o.goBuild(ctx, p[0], p[1], out, "./cmd/wsu-agent"); err != nil {
			return "", err
		}
		replace[filepath.Join(o.Repo, "cmd", "internal", "agents", name)] = out
		// The sum recorded beside the agent (as make agents writes it) must
		// be this build's, not a stale one left in the tree by make.
		rec, err := agentRecord(out)
		if err != nil {
			return "", err
		}
		replace[filepath.Join(o.Repo, "cmd", "internal", "agents", name+".sha256")] = rec
	}
	data, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	path := filepath.Join(work, "overlay.json")
	return path, os.WriteFile(path, data, 0o644)
}

// agentRecord writes the record transport/agentbin reads beside an
// embedded agent (NAME.sha256: hex sum and size) and returns its path.
func agentRecord(agent string) (string, error) {
	data, err := os.ReadFile(agent)
	if err != nil {
		return "", err
	}
	rec := agent + ".sha256"
	return rec, os.WriteFile(rec, fmt.Appendf(nil, "%x %d\n", sha256.Sum256(data), len(data)), 0o644)
}

// goBuild builds pkg for goos/goarch into out: static, -trimpath, stripped,
// the version stamped.
func (o *StageOptions) goBuild(ctx context.Context, goos, goarch, out, pkg string, extra ...string) error {
	args := append([]string{"build", "-trimpath",
		"-ldflags", "-s -w -X github.com/wsu-project/wsu/version.Version=" + o.Version,
		"-o", out}, extra...)
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = o.Repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	fmt.Fprintf(o.Log, "GOOS=%s GOARCH=%s %s %s\n", goos, goarch, o.Go, strings.Join(args, " "))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (%s/%s): %w\n%s", pkg, goos, goarch, err, b)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
