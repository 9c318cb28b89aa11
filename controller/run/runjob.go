package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// JobPodOptions are what `wsu-controller run-job` (a Job's pod) is given.
type JobPodOptions struct {
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

// JobPod runs one Job's playbook run in this process, exactly as InProcess
// runs a Request in the controller, and writes its result to
// ResultFile. The request is a setup.Request (DecodeRequest, Unpack); an
// apply held to a plan hash is planned first and applied only if the
// fresh plan has that hash. The returned outcome is also the
// one written; an error means no result could be written.
func JobPod(ctx context.Context, o JobPodOptions) (Outcome, error) {
	out, knownHosts, err := runJob(ctx, o)
	if err != nil {
		out = Outcome{Failed: true, Message: err.Error()}
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

func runJob(ctx context.Context, o JobPodOptions) (Outcome, string, error) {
	data, err := os.ReadFile(o.Request)
	if err != nil {
		return Outcome{}, "", fmt.Errorf("reading the run request: %w", err)
	}
	sr, err := setup.DecodeRequest(data)
	if err != nil {
		return Outcome{}, "", fmt.Errorf("%s: %w", o.Request, err)
	}
	if o.KeyFile != "" {
		if sr.SecretFiles.HostVars == nil {
			sr.SecretFiles.HostVars = map[string]string{}
		}
		sr.SecretFiles.HostVars[kubeinv.KeyVar] = o.KeyFile
	}
	dir := o.WorkDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), DefaultJobWorkDir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return Outcome{}, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Outcome{}, "", err
	}
	defer os.RemoveAll(dir)
	if sr, err = sr.Unpack(dir); err != nil {
		return Outcome{}, "", err
	}
	// An apply held to a plan hash is checked against a fresh plan by the
	// engine (engine.Request.ExpectHash); that plan's file hashes serve
	// the apply.
	req := Request{Request: sr}
	out := InProcess{Agents: o.Agents, Sources: setup.NewSourceHashes()}.Run(ctx, req)
	out.Plan = nil // only its hash travels back
	return out, readKnownHosts(req), nil
}

func readKnownHosts(req Request) string {
	f := knownHostsFile(req.Inventory)
	if f == "" {
		return ""
	}
	data, _ := os.ReadFile(f)
	return string(data)
}
