// Package sim is a SIMULATED Windows host for tests and the demo: it
// implements host.Host on Linux with a Windows shape (drive-letter paths,
// services, registry, machine environment, HNS) so node modules, the agent
// and whole playbooks can be exercised without a Windows machine.
//
// It manages nothing real and must never be presented as a way to manage a
// host. Everything it "does" lives under one root directory:
//
//	root/fs/<DRIVE>/...   the file systems (C:\k\x.exe is root/fs/C/k/x.exe)
//	root/state/*.json     services, processes, registry and HNS tables
//	root/logs/<svc>.log   output of services that really run
//
// so an agent restarted on the same root sees the same host, and two agents
// sharing a root serialise through a lock file. A service or Run whose
// binary is a Linux executable (ELF or #! script) really runs as a child
// process; any other binary is simulated.
package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/wsu-project/wsu/host"
)

// EnvRoot is set in the environment of every process the simulation starts
// (Run and services), so stand-in binaries can open the same host with New
// and translate the Windows paths they are given.
const EnvRoot = "WSU_SIM_ROOT"

// EnvService names the service a stand-in binary runs as.
const EnvService = "WSU_SIM_SERVICE"

// Windows' own failures, as sentinel errors so tests can check for them.
// The texts are the Win32 messages (lower-cased for Go style) and codes.
var (
	// ErrFileInUse: writing, removing or renaming over the binary of a
	// running service, which is what real nodes do to kube-proxy.exe.
	ErrFileInUse                = errors.New("the process cannot access the file because it is being used by another process (ERROR_SHARING_VIOLATION)")
	ErrServiceExists            = errors.New("the specified service already exists (ERROR_SERVICE_EXISTS)")
	ErrServiceNotFound          = errors.New("the specified service does not exist as an installed service (ERROR_SERVICE_DOES_NOT_EXIST)")
	ErrServiceAlreadyRunning    = errors.New("an instance of the service is already running (ERROR_SERVICE_ALREADY_RUNNING)")
	ErrServiceDisabled          = errors.New("the service cannot be started because it is disabled (ERROR_SERVICE_DISABLED)")
	ErrDependentServicesRunning = errors.New("a stop control has been sent to a service that other running services are dependent on (ERROR_DEPENDENT_SERVICES_RUNNING)")
	ErrDependencyMissing        = errors.New("the dependency service does not exist or has been marked for deletion (ERROR_SERVICE_DEPENDENCY_DELETED)")
	ErrCircularDependency       = errors.New("a circular service dependency was specified (ERROR_CIRCULAR_DEPENDENCY)")
	ErrAccessDenied             = errors.New("access is denied (ERROR_ACCESS_DENIED)")
)

// Options are the simulated host's identity.
type Options struct {
	Hostname string // default "sim-host"
	FQDN     string // default "sim-host.local"
	IPv4     string // default "127.0.0.1"
}

// Host is a simulated Windows host rooted in a directory.
type Host struct {
	root     string
	fsRoot   string
	stateDir string
	logDir   string
	facts    host.Facts

	// Binaries of Run calls in flight in this process: like a service's
	// binary they cannot be replaced while they run.
	runMu  sync.Mutex
	runBin map[string]int

	// A reboot this Host was asked for (boot.go): one at a time; halted
	// closes once it has happened.
	rebootMu  sync.Mutex
	rebooting bool
	halted    chan struct{}
}

var (
	_ host.Host             = (*Host)(nil)
	_ host.Rebooter         = (*Host)(nil)
	_ host.OptionalFeatures = (*Host)(nil)
)

// New opens (creating on first use) the simulated host under root.
func New(root string, opts Options) (*Host, error) {
	if !supported {
		return nil, errors.New("sim: the Windows host simulation runs on Linux only")
	}
	if root == "" {
		return nil, errors.New("sim: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if opts.Hostname == "" {
		opts.Hostname = "sim-host"
	}
	if opts.FQDN == "" {
		opts.FQDN = "sim-host.local"
	}
	if opts.IPv4 == "" {
		opts.IPv4 = "127.0.0.1"
	}
	h := &Host{
		root:     abs,
		fsRoot:   filepath.Join(abs, "fs"),
		stateDir: filepath.Join(abs, "state"),
		logDir:   filepath.Join(abs, "logs"),
		runBin:   map[string]int{},
		halted:   make(chan struct{}),
		facts: host.Facts{
			OS:           "windows",
			Platform:     "windows-server-sim",
			Version:      "10.0.20348",
			Build:        "20348",
			Hostname:     opts.Hostname,
			FQDN:         opts.FQDN,
			Architecture: "amd64",
			IPv4:         opts.IPv4,
		},
	}
	// A fresh node has its system directories; MkdirAll keeps an existing
	// root as it is.
	for _, d := range []string{
		h.stateDir, h.logDir,
		filepath.Join(h.fsRoot, "C", "Windows", "System32"),
		filepath.Join(h.fsRoot, "C", "Program Files"),
		filepath.Join(h.fsRoot, "C", "ProgramData"),
		filepath.Join(h.fsRoot, "C", "Users"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	if err := h.seed(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return h, nil
}

// Root is the directory holding the simulated host.
func (h *Host) Root() string { return h.root }

// Facts describes the simulated host; the boot time is read from its
// state, since a reboot changes it.
func (h *Host) Facts(ctx context.Context) (host.Facts, error) {
	if err := ctx.Err(); err != nil {
		return host.Facts{}, err
	}
	f := h.facts
	bt, err := h.BootTime()
	if err != nil {
		return host.Facts{}, err
	}
	f.BootTime = bt
	err = h.view(func(t *tx) error {
		sys, err := t.system()
		if err == nil && sys.Build != "" {
			f.Build = sys.Build
		}
		return err
	})
	return f, err
}

// Close releases nothing: services keep running, as they would when an
// agent disconnects from a real node.
func (h *Host) Close() error { return nil }
