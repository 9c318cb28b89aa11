package host

import (
	"context"
	"time"
)

// The Windows-side operations of the Host API: services, registry, machine
// environment, processes and HNS. A platform that lacks one returns an error
// wrapping ErrNotSupported (see Unsupported).

// Services manages Windows services through the Service Control Manager.
type Services interface {
	// QueryService describes a service; a missing one is Exists=false, not
	// an error.
	QueryService(ctx context.Context, name string) (ServiceInfo, error)
	// CreateService creates a service from its basic configuration
	// (Description included). It fails if the service exists.
	CreateService(ctx context.Context, cfg ServiceConfig) error
	// UpdateService rewrites the basic configuration of an existing service.
	// A new binary path takes effect at the next start.
	UpdateService(ctx context.Context, cfg ServiceConfig) error
	// SetServiceRecovery sets the failure actions: a separate step because
	// some platforms (Wine) cannot, and that must be reported, not hidden.
	SetServiceRecovery(ctx context.Context, name string, r ServiceRecovery) error
	StartService(ctx context.Context, name string) error
	// StopService stops a service and waits until its process has exited,
	// so its binary can be replaced.
	StopService(ctx context.Context, name string, timeout time.Duration) error
	// DeleteService marks a service for deletion and waits until the SCM no
	// longer knows it (stopping it first if it runs).
	DeleteService(ctx context.Context, name string, timeout time.Duration) error
	// WaitService waits until a service reaches state.
	WaitService(ctx context.Context, name string, state ServiceState, timeout time.Duration) error
	// DependentServices lists the services that depend on name, directly
	// or through others, whatever their state, in the order to stop them:
	// each before every service it depends on (deepest first). Starting
	// them in reverse order starts each after its dependencies. The SCM
	// refuses to stop a service while a dependent runs, so this is what a
	// caller stops first. A missing service is an error.
	DependentServices(ctx context.Context, name string) ([]ServiceStatus, error)
}

// ServiceStatus is a service's name and run state.
type ServiceStatus struct {
	Name  string       `json:"name"`
	State ServiceState `json:"state"`
}

// ServiceState is a service's run state.
type ServiceState string

const (
	ServiceStopped      ServiceState = "stopped"
	ServiceStartPending ServiceState = "start_pending"
	ServiceStopPending  ServiceState = "stop_pending"
	ServiceRunning      ServiceState = "running"
	ServicePaused       ServiceState = "paused"
	ServiceUnknown      ServiceState = "unknown"
)

// StartType is when the SCM starts a service.
type StartType string

const (
	StartAutomatic        StartType = "automatic"
	StartDelayedAutomatic StartType = "delayed_automatic"
	StartManual           StartType = "manual"
	StartDisabled         StartType = "disabled"
)

// ServiceConfig is a service's basic configuration.
type ServiceConfig struct {
	Name        string `json:"name"`
	DisplayName string `json:"display_name,omitempty"`
	Description string `json:"description,omitempty"`
	// BinaryPath is the executable; Args its arguments. The platform builds
	// the quoted command line, so paths with spaces are safe.
	BinaryPath   string    `json:"binary_path"`
	Args         []string  `json:"args,omitempty"`
	StartType    StartType `json:"start_type,omitempty"`
	Dependencies []string  `json:"dependencies,omitempty"`
}

// ServiceInfo is what QueryService returns.
type ServiceInfo struct {
	Exists bool          `json:"exists"`
	State  ServiceState  `json:"state,omitempty"`
	PID    int           `json:"pid,omitempty"`
	Config ServiceConfig `json:"config"`
	// Recovery is the service's failure actions, when the platform reads
	// them with the rest and any are configured; nil otherwise (none, or
	// not readable: Wine, an older agent). It saves a re-run's plan the
	// registry reads for them.
	Recovery *ObservedRecovery `json:"recovery,omitempty"`
}

// ObservedRecovery is a service's failure actions as the SCM reports them.
type ObservedRecovery struct {
	ServiceRecovery
	// Other is set when actions besides restarts (reboot, run a program)
	// are configured; RestartDelays lists the restarts only.
	Other bool `json:"other,omitempty"`
}

// ServiceRecovery is what the SCM does when a service fails.
type ServiceRecovery struct {
	// RestartDelays lists one restart action per failure, in order; the
	// last repeats.
	RestartDelays []time.Duration `json:"restart_delays"`
	ResetPeriod   time.Duration   `json:"reset_period"`
}

// Registry reads and writes registry values. Keys are full paths starting
// with a hive: HKLM\SYSTEM\..., HKCU\..., HKCR\..., HKU\..., HKCC\....
type Registry interface {
	RegistryGet(ctx context.Context, key, name string) (RegistryValue, error)
	// RegistrySet creates the key if needed and sets the value.
	RegistrySet(ctx context.Context, key, name string, v RegistryValue) error
	// RegistryDelete deletes a value; a missing value is not an error.
	RegistryDelete(ctx context.Context, key, name string) error
}

// RegistryType is a registry value type.
type RegistryType string

const (
	RegSZ       RegistryType = "REG_SZ"
	RegExpandSZ RegistryType = "REG_EXPAND_SZ"
	RegMultiSZ  RegistryType = "REG_MULTI_SZ"
	RegDWORD    RegistryType = "REG_DWORD"
	RegQWORD    RegistryType = "REG_QWORD"
	RegBinary   RegistryType = "REG_BINARY"
)

// RegistryValue is one value; which field holds it depends on Type.
type RegistryValue struct {
	Exists  bool         `json:"exists"`
	Type    RegistryType `json:"type,omitempty"`
	String  string       `json:"string,omitempty"`  // REG_SZ, REG_EXPAND_SZ
	Strings []string     `json:"strings,omitempty"` // REG_MULTI_SZ
	Integer uint64       `json:"integer,omitempty"` // REG_DWORD, REG_QWORD
	Binary  []byte       `json:"binary,omitempty"`  // REG_BINARY
}

// Environment manages machine-scope environment variables (what new
// processes and services see).
type Environment interface {
	EnvGet(ctx context.Context, name string) (value string, exists bool, err error)
	EnvSet(ctx context.Context, name, value string) error
	EnvDelete(ctx context.Context, name string) error
	// PathAdd appends dir to the machine PATH unless an entry equal to it
	// (case-insensitively, ignoring a trailing backslash) is there already.
	PathAdd(ctx context.Context, dir string) (changed bool, err error)
	// PathRemove removes every entry equal to dir in the same sense.
	PathRemove(ctx context.Context, dir string) (changed bool, err error)
}

// Processes lists and kills processes.
type Processes interface {
	ListProcesses(ctx context.Context) ([]Process, error)
	// Kill terminates a process by PID, or every process whose image name
	// matches (case-insensitively) when pid is 0. It returns how many.
	Kill(ctx context.Context, pid int, image string) (int, error)
}

// Process is one running process.
type Process struct {
	PID   int    `json:"pid"`
	Image string `json:"image"`
}

// HNS is the Host Networking Service (container networks on Windows).
type HNS interface {
	HNSNetworks(ctx context.Context) ([]HNSNetwork, error)
	HNSEndpoints(ctx context.Context) ([]HNSEndpoint, error)
	// HNSCreateEndpoint creates an endpoint on a network, attached to the
	// host compartment when HostAttach is set.
	HNSCreateEndpoint(ctx context.Context, spec HNSEndpoint) (HNSEndpoint, error)
	HNSDeleteEndpoint(ctx context.Context, id string) error
	HNSDeleteNetwork(ctx context.Context, id string) error
}

// HNSNetwork is one HNS network.
type HNSNetwork struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Type         string   `json:"type"`
	ManagementIP string   `json:"management_ip,omitempty"`
	Subnets      []string `json:"subnets,omitempty"`
}

// HNSEndpoint is one HNS endpoint.
type HNSEndpoint struct {
	ID         string `json:"id,omitempty"`
	Name       string `json:"name"`
	Network    string `json:"network"` // network name
	IP         string `json:"ip,omitempty"`
	MAC        string `json:"mac,omitempty"`
	HostAttach bool   `json:"host_attach,omitempty"`
}

// Unsupported implements every Windows-side operation by returning
// ErrNotSupported. Platforms embed it and override what they support.
type Unsupported struct {
	// Platform names the platform in the error.
	Platform string
}

func (u Unsupported) no(op string) error { return NotSupported(op, u.Platform) }

// PlatformName names the platform for not-supported errors of optional
// operations (PlatformOf).
func (u Unsupported) PlatformName() string { return u.Platform }

// PlatformOf names h's platform for a not-supported error of an optional
// interface h lacks: the name a backend embedding Unsupported gives.
func PlatformOf(h Host) string {
	if p, ok := h.(interface{ PlatformName() string }); ok {
		return p.PlatformName()
	}
	return "this backend"
}

func (u Unsupported) QueryService(context.Context, string) (ServiceInfo, error) {
	return ServiceInfo{}, u.no("service query")
}
func (u Unsupported) CreateService(context.Context, ServiceConfig) error {
	return u.no("service create")
}
func (u Unsupported) UpdateService(context.Context, ServiceConfig) error {
	return u.no("service update")
}
func (u Unsupported) SetServiceRecovery(context.Context, string, ServiceRecovery) error {
	return u.no("service recovery")
}
func (u Unsupported) StartService(context.Context, string) error { return u.no("service start") }
func (u Unsupported) StopService(context.Context, string, time.Duration) error {
	return u.no("service stop")
}
func (u Unsupported) DeleteService(context.Context, string, time.Duration) error {
	return u.no("service delete")
}
func (u Unsupported) WaitService(context.Context, string, ServiceState, time.Duration) error {
	return u.no("service wait")
}
func (u Unsupported) DependentServices(context.Context, string) ([]ServiceStatus, error) {
	return nil, u.no("service dependents")
}
func (u Unsupported) RegistryGet(context.Context, string, string) (RegistryValue, error) {
	return RegistryValue{}, u.no("registry get")
}
func (u Unsupported) RegistrySet(context.Context, string, string, RegistryValue) error {
	return u.no("registry set")
}
func (u Unsupported) RegistryDelete(context.Context, string, string) error {
	return u.no("registry delete")
}
func (u Unsupported) EnvGet(context.Context, string) (string, bool, error) {
	return "", false, u.no("machine environment get")
}
func (u Unsupported) EnvSet(context.Context, string, string) error {
	return u.no("machine environment set")
}
func (u Unsupported) EnvDelete(context.Context, string) error {
	return u.no("machine environment delete")
}
func (u Unsupported) PathAdd(context.Context, string) (bool, error) {
	return false, u.no("machine PATH add")
}
func (u Unsupported) PathRemove(context.Context, string) (bool, error) {
	return false, u.no("machine PATH remove")
}
func (u Unsupported) ListProcesses(context.Context) ([]Process, error) {
	return nil, u.no("process list")
}
func (u Unsupported) Kill(context.Context, int, string) (int, error) {
	return 0, u.no("process kill")
}
func (u Unsupported) HNSNetworks(context.Context) ([]HNSNetwork, error) {
	return nil, u.no("HNS networks")
}
func (u Unsupported) HNSEndpoints(context.Context) ([]HNSEndpoint, error) {
	return nil, u.no("HNS endpoints")
}
func (u Unsupported) HNSCreateEndpoint(context.Context, HNSEndpoint) (HNSEndpoint, error) {
	return HNSEndpoint{}, u.no("HNS endpoint create")
}
func (u Unsupported) HNSDeleteEndpoint(context.Context, string) error {
	return u.no("HNS endpoint delete")
}
func (u Unsupported) HNSDeleteNetwork(context.Context, string) error {
	return u.no("HNS network delete")
}
func (u Unsupported) FileACL(context.Context, string) (ACL, error) {
	return ACL{}, u.no("file ACL get")
}
func (u Unsupported) SetFileACL(context.Context, string, ACL) error {
	return u.no("file ACL set")
}
func (u Unsupported) SystemTime(context.Context) (time.Time, error) {
	return time.Time{}, u.no("system time")
}
func (u Unsupported) DiskFree(context.Context, string) (DiskSpace, error) {
	return DiskSpace{}, u.no("disk free space")
}
