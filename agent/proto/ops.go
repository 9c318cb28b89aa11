package proto

import (
	"io/fs"
	"time"

	"github.com/wsu-project/wsu/host"
)

// Op names: one per host.Host method (Close is the connection, not an op).
// Durations travel as integer nanoseconds, file modes as numbers.
const (
	OpFacts = "facts"

	OpStat    = "fs.stat"   // PathArgs → host.FileInfo
	OpSHA256  = "fs.sha256" // PathArgs → SHA256Result
	OpRead    = "fs.read"   // ReadArgs → data frames, then ReadResult
	OpWrite   = "fs.write"  // PathModeArgs + stream → nothing
	OpMkdir   = "fs.mkdir"  // PathModeArgs → nothing
	OpChmod   = "fs.chmod"  // PathModeArgs → nothing
	OpRemove  = "fs.remove" // RemoveArgs → nothing
	OpReadDir = "fs.list"   // ReadDirArgs → []host.DirEntry
	// OpNativePath is not a Host method: it tells a transport where a path
	// lives for the host's OS (host.NativePather), so it can reach the file
	// another way (SFTP).
	OpNativePath = "fs.native_path" // PathArgs → PathResult
	OpACLGet     = "fs.acl.get"     // PathArgs → host.ACL
	OpACLSet     = "fs.acl.set"     // ACLArgs → nothing

	OpRun  = "proc.run"  // RunArgs (+ stream: stdin) → data frames: stdout then stderr, then RunResult
	OpList = "proc.list" // nothing → []host.Process
	OpKill = "proc.kill" // KillArgs → CountResult

	OpDial = "net.dial" // DialArgs → nothing
	OpHTTP = "net.http" // host.HTTPRequest → host.HTTPResponse

	OpSysTime  = "sys.time" // nothing → TimeResult
	OpDiskFree = "fs.free"  // PathArgs → host.DiskSpace

	OpSvcQuery    = "svc.query"    // NameArgs → host.ServiceInfo
	OpSvcCreate   = "svc.create"   // ServiceArgs → nothing
	OpSvcUpdate   = "svc.update"   // ServiceArgs → nothing
	OpSvcRecovery = "svc.recovery" // RecoveryArgs → nothing
	OpSvcStart    = "svc.start"    // NameArgs → nothing
	OpSvcStop     = "svc.stop"     // NameTimeoutArgs → nothing
	OpSvcDelete   = "svc.delete"   // NameTimeoutArgs → nothing
	OpSvcWait     = "svc.wait"     // WaitArgs → nothing
	// OpSvcDependents lists a service's dependents in stop order.
	OpSvcDependents = "svc.dependents" // NameArgs → []host.ServiceStatus

	OpRegGet    = "reg.get"    // RegArgs → host.RegistryValue
	OpRegSet    = "reg.set"    // RegSetArgs → nothing
	OpRegDelete = "reg.delete" // RegArgs → nothing

	OpEnvGet    = "env.get"     // NameArgs → EnvResult
	OpEnvSet    = "env.set"     // EnvSetArgs → nothing
	OpEnvDelete = "env.delete"  // NameArgs → nothing
	OpPathAdd   = "path.add"    // DirArgs → ChangedResult
	OpPathRm    = "path.remove" // DirArgs → ChangedResult

	OpHNSNetworks       = "hns.networks"        // nothing → []host.HNSNetwork
	OpHNSEndpoints      = "hns.endpoints"       // nothing → []host.HNSEndpoint
	OpHNSCreateEndpoint = "hns.endpoint.create" // EndpointArgs → host.HNSEndpoint
	OpHNSDeleteEndpoint = "hns.endpoint.delete" // IDArgs → nothing
	OpHNSDeleteNetwork  = "hns.network.delete"  // IDArgs → nothing

	// The LocalMachine certificate stores (host.CertStore, optional: a
	// backend without one answers not supported).
	OpCertList   = "cert.list"   // StoreArgs → []string (thumbprints)
	OpCertAdd    = "cert.add"    // CertAddArgs → nothing
	OpCertDelete = "cert.delete" // CertArgs → nothing

	// Optional interfaces (host.Rebooter, host.OptionalFeatures): a backend
	// without them answers not supported.
	OpReboot        = "sys.reboot"     // host.RebootRequest → nothing
	OpFeatureGet    = "feature.get"    // NameArgs → host.FeatureInfo
	OpFeatureEnable = "feature.enable" // NameArgs → host.FeatureInfo

	// The firewall ops are host.Firewall's, optional: a backend without a
	// firewall answers not_supported.
	OpFwGet    = "fw.rule.get"    // NameArgs → host.FirewallRule
	OpFwSet    = "fw.rule.set"    // FirewallRuleArgs → nothing
	OpFwDelete = "fw.rule.delete" // NameArgs → nothing
)

// Ops lists every op, in the order of the Host API.
var Ops = []string{
	OpFacts,
	OpStat, OpSHA256, OpRead, OpWrite, OpMkdir, OpChmod, OpRemove, OpReadDir, OpNativePath, OpACLGet, OpACLSet,
	OpRun, OpList, OpKill,
	OpDial, OpHTTP,
	OpSysTime, OpDiskFree,
	OpSvcQuery, OpSvcCreate, OpSvcUpdate, OpSvcRecovery, OpSvcStart, OpSvcStop, OpSvcDelete, OpSvcWait, OpSvcDependents,
	OpRegGet, OpRegSet, OpRegDelete,
	OpEnvGet, OpEnvSet, OpEnvDelete, OpPathAdd, OpPathRm,
	OpHNSNetworks, OpHNSEndpoints, OpHNSCreateEndpoint, OpHNSDeleteEndpoint, OpHNSDeleteNetwork,
	OpCertList, OpCertAdd, OpCertDelete,
	OpReboot, OpFeatureGet, OpFeatureEnable,
	OpFwGet, OpFwSet, OpFwDelete,
}

type PathArgs struct {
	Path string `json:"path"`
}

type PathResult struct {
	Path string `json:"path"`
}

type SHA256Result struct {
	SHA256 string `json:"sha256"`
}

type ReadArgs struct {
	Path  string `json:"path"`
	Limit int64  `json:"limit,omitempty"`
}

// ReadResult follows the content's data frames; Size lets the client check
// it got all of them.
type ReadResult struct {
	Size int64 `json:"size"`
}

type PathModeArgs struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
}

type RemoveArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

type ReadDirArgs struct {
	Path  string `json:"path"`
	Limit int    `json:"limit,omitempty"`
}

// RunArgs is host.RunRequest without Stdin, which is the request's stream
// when there is one.
type RunArgs struct {
	Argv        []string      `json:"argv"`
	Dir         string        `json:"dir,omitempty"`
	Env         []string      `json:"env,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	OutputLimit int           `json:"output_limit,omitempty"`
}

// RunResult follows the data frames holding stdout and then stderr; the
// lengths split them.
type RunResult struct {
	ExitCode  int  `json:"exit_code"`
	StdoutLen int  `json:"stdout_len"`
	StderrLen int  `json:"stderr_len"`
	Truncated bool `json:"truncated,omitempty"`
	TimedOut  bool `json:"timed_out,omitempty"`
}

type KillArgs struct {
	PID   int    `json:"pid,omitempty"`
	Image string `json:"image,omitempty"`
}

type CountResult struct {
	Count int `json:"count"`
}

type DialArgs struct {
	Address string        `json:"address"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// TimeResult is the host's clock when the agent read it.
type TimeResult struct {
	Time time.Time `json:"time"`
}

type NameArgs struct {
	Name string `json:"name"`
}

type ServiceArgs struct {
	Config host.ServiceConfig `json:"config"`
}

type RecoveryArgs struct {
	Name     string               `json:"name"`
	Recovery host.ServiceRecovery `json:"recovery"`
}

type NameTimeoutArgs struct {
	Name    string        `json:"name"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

type WaitArgs struct {
	Name    string            `json:"name"`
	State   host.ServiceState `json:"state"`
	Timeout time.Duration     `json:"timeout,omitempty"`
}

type RegArgs struct {
	Key  string `json:"key"`
	Name string `json:"name"`
}

type RegSetArgs struct {
	Key   string             `json:"key"`
	Name  string             `json:"name"`
	Value host.RegistryValue `json:"value"`
}

type EnvResult struct {
	Value  string `json:"value"`
	Exists bool   `json:"exists"`
}

type EnvSetArgs struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type DirArgs struct {
	Dir string `json:"dir"`
}

type ChangedResult struct {
	Changed bool `json:"changed"`
}

type EndpointArgs struct {
	Spec host.HNSEndpoint `json:"spec"`
}

type IDArgs struct {
	ID string `json:"id"`
}

type ACLArgs struct {
	Path string   `json:"path"`
	ACL  host.ACL `json:"acl"`
}

type StoreArgs struct {
	Store string `json:"store"`
}

// CertAddArgs carries a DER certificate (base64 in JSON).
type CertAddArgs struct {
	Store string `json:"store"`
	DER   []byte `json:"der"`
}

type CertArgs struct {
	Store      string `json:"store"`
	Thumbprint string `json:"thumbprint"`
}

type FirewallRuleArgs struct {
	Rule host.FirewallRule `json:"rule"`
}
