package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The Machine API's CRDs come from the module that publishes them,
// openshift/machine-api-operator (install/, the Default feature set's
// manifests, as a cluster without tech-preview features serves them), at
// this version: downloaded once by the go command from the module proxy
// and kept in the module cache, keyed by version. The CRDs are never
// written by hand, so the controller is tested against the schema the
// Machine API serves.
const (
	MachineAPIModule  = "github.com/openshift/machine-api-operator"
	MachineAPIVersion = "v0.2.1-0.20260226113419-88465550a74b"
)

// machineAPICRDFiles are the CRDs, in the module's install/.
var machineAPICRDFiles = []string{
	"install/0000_30_machine-api-operator_02_machine.Default.crd.yaml",
	"install/0000_30_machine-api-operator_03_machineset.Default.crd.yaml",
}

// MachineAPICRDs are the paths of the Machine and MachineSet CRDs
// (machine.openshift.io/v1beta1), downloading their module when the cache
// lacks it; an error says how to get it by hand.
func MachineAPICRDs(ctx context.Context) ([]string, error) {
	goCmd, err := goTool()
	if err != nil {
		return nil, err
	}
	mod := MachineAPIModule + "@" + MachineAPIVersion
	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", mod)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Dir = os.TempDir() // outside any module: no go.mod is read or changed
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubetest: downloading the Machine API's CRDs (go mod download %s): %w; %s", mod, err, exitText(err))
	}
	var got struct{ Dir, Error string }
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("kubetest: go mod download %s: %w", mod, err)
	}
	if got.Error != "" || got.Dir == "" {
		return nil, fmt.Errorf("kubetest: go mod download %s: %s", mod, got.Error)
	}
	var paths []string
	for _, f := range machineAPICRDFiles {
		p := filepath.Join(got.Dir, filepath.FromSlash(f))
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubetest: the Machine API module %s lacks %s: %w", mod, f, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// InstallMachineAPI installs the Machine API's CRDs (MachineAPICRDs) and
// waits until they are served.
func (c *Cluster) InstallMachineAPI(ctx context.Context) error {
	paths, err := MachineAPICRDs(ctx)
	if err != nil {
		return err
	}
	return c.InstallCRDFiles(paths...)
}

func exitText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
