package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// RunJobOptions are what `wsu controller run-job` (a Job's pod) is given.
type RunJobOptions struct {
	// Request is the run request file (the Job's request annotation,
	// mounted through the downward API).
	Request string
	// KeyFile is the instance's private key (its key Secret, mounted).
	KeyFile string
	// ResultFile receives the result (the container's termination message
	// file).
	ResultFile string
	// WorkDir holds the run's files (site playbook, var files,
	// known_hosts); default: DefaultJobWorkDir, emptied first and removed
	// after. Its path must be the same for every run: the files' paths are
	// part of the plan hash an apply is held to.
	WorkDir string
	// Agents are the agent builds the run deploys (the image's wsu's).
	Agents *agentbin.Source
}

// DefaultJobWorkDir is the run's directory under the pod's temporary
// directory.
const DefaultJobWorkDir = "wsu-run"

// RunJob runs one Job's playbook run in this process, exactly as InProcess
// runs a RunRequest in the controller, and writes its result to
// ResultFile. An apply held to a plan hash is planned first and applied
// only if the fresh plan has that hash. The returned outcome is also the
// one written; an error means no result could be written.
func RunJob(ctx context.Context, o RunJobOptions) (RunOutcome, error) {
	out, knownHosts, err := runJob(ctx, o)
	if err != nil {
		out = RunOutcome{Failed: true, Message: err.Error()}
	}
	data, err := encodeResult(resultOf(out, knownHosts))
	if err != nil {
		return out, err
	}
	if err := os.WriteFile(o.ResultFile, data, 0o644); err != nil {
		return out, fmt.Errorf("writing the result: %w", err)
	}
	return out, nil
}

func runJob(ctx context.Context, o RunJobOptions) (RunOutcome, string, error) {
	data, err := os.ReadFile(o.Request)
	if err != nil {
		return RunOutcome{}, "", fmt.Errorf("reading the run request: %w", err)
	}
	var jr jobRequest
	if err := json.Unmarshal(data, &jr); err != nil {
		return RunOutcome{}, "", fmt.Errorf("the run request %s: %w", o.Request, err)
	}
	key, err := os.ReadFile(o.KeyFile)
	if err != nil {
		return RunOutcome{}, "", fmt.Errorf("reading the private key: %w", err)
	}
	dir := o.WorkDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), DefaultJobWorkDir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return RunOutcome{}, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return RunOutcome{}, "", err
	}
	defer os.RemoveAll(dir)
	req, err := jr.runRequest(dir, string(key))
	if err != nil {
		return RunOutcome{}, "", err
	}
	runner := InProcess{Agents: o.Agents, Sources: setup.NewSourceHashes()} // the plan's hashes serve the apply
	if req.Mode == engine.ModeApply && jr.ExpectHash != "" {
		plan := req
		plan.Mode = engine.ModePlan
		p := runner.Run(ctx, plan)
		switch {
		case p.Failed:
			return p, readKnownHosts(req), nil
		case p.Hash != jr.ExpectHash:
			return RunOutcome{Failed: true, Facts: p.Facts, Hash: p.Hash, Message: fmt.Sprintf(
				"the plan changed since it was approved (now %s, approved %s): nothing was applied", p.Hash, jr.ExpectHash)}, readKnownHosts(req), nil
		}
		req.Expect = p.Plan
	}
	out := runner.Run(ctx, req)
	out.Plan = nil // only its hash travels back
	return out, readKnownHosts(req), nil
}

// runRequest rebuilds the RunRequest in dir: the site playbook, var files
// and known_hosts written there, the keys put back into the inventory and
// the values of Secrets into the vars, from their mounted files.
func (jr *jobRequest) runRequest(dir, key string) (RunRequest, error) {
	newKey := ""
	if jr.NewKeyFile != "" {
		data, err := os.ReadFile(jr.NewKeyFile)
		if err != nil {
			return RunRequest{}, fmt.Errorf("reading the new key: %w", err)
		}
		newKey = string(data)
	}
	inv, err := decodeInventory(jr.Inventory, key, newKey)
	if err != nil {
		return RunRequest{}, err
	}
	vars := slices.Clone(jr.Vars)
	fromSecrets := map[int]SecretItem{} // which Secret does not matter here: that it is one
	for i, f := range jr.SecretVars {
		if i < 0 || i >= len(vars) {
			return RunRequest{}, fmt.Errorf("the run request names a Secret value for var %d of %d", i, len(vars))
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return RunRequest{}, fmt.Errorf("reading a varsFrom Secret's value: %w", err)
		}
		vars[i] += string(data)
		fromSecrets[i] = SecretItem{}
	}
	req := RunRequest{Instance: jr.Instance, Mode: jr.Mode, Playbook: jr.Playbook, ReadDirs: jr.ReadDirs, Vars: vars, Inventory: inv,
		Secrets: RunSecrets{Vars: fromSecrets}}
	if len(jr.Files) > 0 {
		pdir := filepath.Join(dir, "playbook")
		if err := writeFiles(pdir, jr.Files); err != nil {
			return RunRequest{}, err
		}
		req.Playbook = filepath.Join(pdir, jr.Playbook)
	}
	for i, f := range jr.VarFiles {
		p := filepath.Join(dir, "vars", fmt.Sprintf("%02d-%s", i, filepath.Base(f.Name)))
		if err := writeFiles(filepath.Dir(p), map[string]string{filepath.Base(p): f.Data}); err != nil {
			return RunRequest{}, err
		}
		req.VarFiles = append(req.VarFiles, p)
	}
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(jr.KnownHosts), 0o600); err != nil {
		return RunRequest{}, err
	}
	for _, h := range inv.Hosts {
		if _, ok := h.Vars[knownHostsVar]; ok {
			h.Vars[knownHostsVar] = inventory.Var{Value: cty.StringVal(kh)}
		}
	}
	return req, nil
}

func writeFiles(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if name == "" || strings.ContainsAny(name, `/\`) || name == ".." {
			return errors.New("the run request names a file outside its directory")
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func readKnownHosts(req RunRequest) string {
	f := knownHostsFile(req.Inventory)
	if f == "" {
		return ""
	}
	data, _ := os.ReadFile(f)
	return string(data)
}
