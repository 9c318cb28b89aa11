//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/harness"
)

// cloudbaseInit is a stand-in for cloudbase-init running Cluster API's
// user data on a new Windows machine, for a simulated host. It does what
// cloudbase-init does with CABPK's Windows user data: renders the
// "## template: jinja" variables from the instance metadata, writes every
// write_files entry (a Unix-absolute path lands on C:, as cloudbase-init
// puts /run/... at C:\run\...), and runs runcmd in order as one cmd.exe
// script would.
//
// Its limits, because a Linux machine cannot run cmd.exe: it understands
// the runcmd forms CABPK and examples/capi write and fails on any other:
// `set "PATH=DIR;%PATH%"`, `A && B`, `echo TEXT > FILE`, and a command
// found along PATH on the host. Of a .cmd file found that way it runs only
// the one `wsu.exe apply join` line, with the batch argument %~3 (the
// JoinConfiguration's path) substituted; the shim's download, hash check
// and payload fetch are not run (the harness has put wsu and the payload in
// place), nor are users created. wsu itself runs on the test machine and reaches the host through
// the harness inventory: `--local` becomes `-i INVENTORY`, and the host
// paths it is given (the JoinConfiguration, payload_dir) become the files
// they name here. A command found nowhere on PATH is an error, so user
// data whose `kubeadm join` would run the real kubeadm fails.
type cloudbaseInit struct {
	env  *harness.Env
	host *harness.Host
	// meta is the instance metadata jinja reads (ds.meta_data).
	meta map[string]string
	// home is wsu's home directory (no ~/.kube there).
	home string
	// ran are the wsu runs, for the test to inspect.
	ran []*harness.Result
}

// userData is the part of cloud-config the stand-in reads.
type userData struct {
	WriteFiles []struct {
		Path        string `json:"path"`
		Content     string `json:"content"`
		Encoding    string `json:"encoding"`
		Permissions string `json:"permissions"`
		// Owner is a POSIX owner cloudbase-init ignores on Windows.
		Owner string `json:"owner"`
	} `json:"write_files"`
	Runcmd []string `json:"runcmd"`
	// Users are created by cloudbase-init; the stand-in does not (the
	// harness logs in as its own user).
	Users []any `json:"users"`
}

// run applies raw user data to the host, as cloudbase-init at first boot.
func (c *cloudbaseInit) run(ctx context.Context, raw string) error {
	text, err := c.jinja(raw)
	if err != nil {
		return err
	}
	var ud userData
	if err := yaml.UnmarshalStrict([]byte(stripFirstLines(text)), &ud); err != nil {
		return fmt.Errorf("cloudbase-init stand-in: user data: %w", err)
	}
	for _, f := range ud.WriteFiles {
		if f.Encoding != "" {
			return fmt.Errorf("cloudbase-init stand-in: %s: encoding %q not supported", f.Path, f.Encoding)
		}
		if err := c.write(ctx, windowsPath(f.Path), f.Content); err != nil {
			return err
		}
	}
	pathDirs := []string{`C:\Windows\system32`, `C:\Windows`}
	for _, line := range ud.Runcmd {
		if err := c.runLine(ctx, line, &pathDirs); err != nil {
			return fmt.Errorf("cloudbase-init stand-in: runcmd %q: %w", line, err)
		}
	}
	return nil
}

// jinja renders the ds.meta_data variables of "## template: jinja" user
// data; any other template syntax is refused.
func (c *cloudbaseInit) jinja(raw string) (string, error) {
	if !strings.HasPrefix(raw, "## template: jinja\n") {
		return raw, nil
	}
	for k, v := range c.meta {
		raw = strings.ReplaceAll(raw, `{{ ds.meta_data["`+k+`"] }}`, v)
	}
	if strings.Contains(raw, "{{") || strings.Contains(raw, "{%") {
		return "", fmt.Errorf("cloudbase-init stand-in: jinja beyond ds.meta_data[%v] not supported", c.meta)
	}
	return raw, nil
}

// stripFirstLines drops the "## template" and "#cloud-config" header.
func stripFirstLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "## template:") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// windowsPath is where cloudbase-init writes a cloud-config path.
func windowsPath(p string) string {
	if strings.HasPrefix(p, "/") {
		p = "C:" + p
	}
	return strings.ReplaceAll(p, "/", `\`)
}

func (c *cloudbaseInit) write(ctx context.Context, p, content string) error {
	return c.env.WithSim(c.host, func(s *sim.Host) error {
		dir := p[:strings.LastIndex(p, `\`)]
		if err := s.MkdirAll(ctx, dir, 0o755); err != nil {
			return err
		}
		return s.WriteFile(ctx, p, strings.NewReader(content), 0o644)
	})
}

// runLine runs one runcmd entry: a PATH change, or commands joined by &&.
func (c *cloudbaseInit) runLine(ctx context.Context, line string, pathDirs *[]string) error {
	if dir, ok := strings.CutPrefix(line, `set "PATH=`); ok {
		dir, ok = strings.CutSuffix(dir, `;%PATH%"`)
		if !ok {
			return fmt.Errorf("only set \"PATH=DIR;%%PATH%%\" is understood")
		}
		*pathDirs = append([]string{dir}, *pathDirs...)
		return nil
	}
	for _, part := range strings.Split(line, "&&") {
		if err := c.runCommand(ctx, strings.Fields(part), *pathDirs); err != nil {
			return err
		}
	}
	return nil
}

// runCommand runs `echo TEXT > FILE` or a command found along PATH.
func (c *cloudbaseInit) runCommand(ctx context.Context, argv []string, pathDirs []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("empty command")
	}
	if argv[0] == "echo" && len(argv) == 4 && argv[2] == ">" {
		return c.write(ctx, windowsPath(argv[3]), argv[1]+"\r\n")
	}
	script, err := c.find(ctx, argv[0], pathDirs)
	if err != nil {
		return err
	}
	return c.runWsuLine(ctx, script, argv[1:])
}

// find is cmd.exe's PATH search for a .cmd or .exe file on the host.
func (c *cloudbaseInit) find(ctx context.Context, name string, pathDirs []string) (string, error) {
	for _, dir := range pathDirs {
		for _, ext := range []string{".cmd", ".exe"} {
			p := dir + `\` + name + ext
			var found bool
			err := c.env.WithSim(c.host, func(s *sim.Host) error {
				fi, err := s.Stat(ctx, p)
				found = err == nil && fi.Exists
				return err
			})
			if err != nil {
				return "", err
			}
			if found {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s is not on PATH %v: the stand-in runs only wsu through a .cmd shim", name, pathDirs)
}

// runWsuLine runs the `wsu.exe apply join` line of a .cmd shim with the
// batch arguments args.
func (c *cloudbaseInit) runWsuLine(ctx context.Context, script string, args []string) error {
	if !strings.HasSuffix(script, ".cmd") {
		return fmt.Errorf("%s: the stand-in cannot run a program, only a .cmd shim's wsu line", script)
	}
	var text []byte
	err := c.env.WithSim(c.host, func(s *sim.Host) error {
		var err error
		text, err = s.ReadFile(ctx, script, 1<<20)
		return err
	})
	if err != nil {
		return err
	}
	var line string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, `wsu.exe apply join `) {
			line = strings.TrimSpace(l)
		}
	}
	if line == "" {
		return fmt.Errorf("%s has no wsu.exe apply join line", script)
	}
	for i, a := range args {
		line = strings.ReplaceAll(line, fmt.Sprintf(`"%%~%d"`, i+1), a)
	}
	return c.wsu(ctx, strings.Fields(line)[1:])
}

// wsu runs the shim's wsu command on the test machine, against the host.
func (c *cloudbaseInit) wsu(ctx context.Context, argv []string) error {
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--local":
			out = append(out, "-i", c.env.Inventory, "--limit", c.host.Name)
		case a == "--join-config" && i+1 < len(argv):
			i++
			local, err := c.localPath(windowsPath(argv[i]))
			if err != nil {
				return err
			}
			out = append(out, a, local)
		case strings.HasPrefix(a, "payload_dir="):
			out = append(out, "payload_dir="+c.env.PayloadDir)
		default:
			out = append(out, a)
		}
	}
	out = append(out, "-o", "json")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.env.WSU, out...)
	cmd.Env = harness.NodeEnv(c.home)
	r, err := harness.RunCmdJSON(cmd, nil)
	if err != nil {
		return err
	}
	c.ran = append(c.ran, r)
	if r.ExitCode != 0 {
		return fmt.Errorf("wsu exited %d:\n%s", r.ExitCode, r.Failures())
	}
	return nil
}

// localPath is where a host path's file is on this machine.
func (c *cloudbaseInit) localPath(p string) (string, error) {
	var local string
	err := c.env.WithSim(c.host, func(s *sim.Host) error {
		var err error
		local, err = s.LocalPath(p)
		return err
	})
	return filepath.Clean(local), err
}
