//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/test/harness"
	wsmantest "github.com/wsu-project/wsu/test/wsman"
	"github.com/wsu-project/wsu/transport/winrm"
)

// winrmResult is one upload over WinRM.
type winrmResult struct {
	name  string
	bytes int64
	wall  time.Duration
}

// measureWinRM connects to the WS-Management test endpoint over HTTPS with
// NTLM (the transport's defaults) as a host without the agent, which
// deploys it (the bootstrap command's stdin: the node agent, wsu-agent), then writes
// the payload's largest file through the agent (fs.write), the path a
// playbook's files take over WinRM.
func measureWinRM(ctx context.Context, env *harness.Env) ([]*winrmResult, error) {
	root, err := os.MkdirTemp("", "wsu-bench-winrm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	sa, err := wsmantest.NewSimAgent(filepath.Join(root, "sim"), winrm.BootstrapFormat())
	if err != nil {
		return nil, err
	}
	srv, err := wsmantest.Start(wsmantest.Options{Handler: sa.Handle})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	caFile := filepath.Join(root, "ca.pem")
	if err := os.WriteFile(caFile, srv.CA.PEM, 0o644); err != nil {
		return nil, err
	}
	vars := map[string]inventory.Var{}
	for k, v := range map[string]string{
		"ansible_host":     srv.Host,
		"ansible_port":     strconv.Itoa(srv.Port),
		"ansible_user":     srv.User,
		"ansible_password": srv.Password,
		"winrm_ca_file":    caFile,
		"wsu_agent_binary": env.Agent,
	} {
		vars[k] = inventory.Var{Value: cty.StringVal(v)}
	}
	cfg, err := winrm.ConfigFromVars("bench", vars)
	if err != nil {
		return nil, err
	}
	h, err := winrm.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	dep := h.Deployment()
	if !dep.Uploaded {
		return nil, errors.New("the agent was not uploaded")
	}
	out := []*winrmResult{{name: "agent upload (bootstrap stdin)", bytes: dep.Bytes, wall: dep.Duration}}

	var big string
	var size int64
	for _, c := range env.Manifest.Components {
		p := filepath.Join(env.PayloadDir, c.File)
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			big, size = p, fi.Size()
		}
	}
	f, err := os.Open(big)
	if err != nil {
		return out, err
	}
	defer f.Close()
	start := time.Now()
	if err := h.WriteFile(ctx, `C:\k\`+filepath.Base(big), f, 0o755); err != nil {
		return out, fmt.Errorf("fs.write %s: %w", filepath.Base(big), err)
	}
	out = append(out, &winrmResult{name: "file write (fs.write via agent)", bytes: size, wall: time.Since(start)})
	return out, nil
}
