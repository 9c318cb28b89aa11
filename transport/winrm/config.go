package winrm

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/hostvars"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/version"
)

// Config is everything the transport needs to reach one host.
type Config struct {
	Name string // inventory name, for messages
	Host string
	Port int
	// HTTPS is the default whatever the port; plain HTTP only with an
	// explicit ansible_winrm_scheme=http and
	// ansible_winrm_message_encryption=never.
	HTTPS    bool
	User     string
	Password string
	// Auth is "ntlm" or "basic".
	Auth string
	// Insecure skips the server certificate check; only an explicit
	// ansible_winrm_server_cert_validation=ignore sets it.
	Insecure bool
	// CAPEM holds the CA certificates to verify the server against; empty
	// means the system roots.
	CAPEM []byte
	// ReadTimeout bounds every HTTP exchange; it must exceed
	// OperationTimeout, which is how long the host holds a Receive open
	// when the command has nothing to say.
	ReadTimeout      time.Duration
	OperationTimeout time.Duration
	// MaxEnvelopeSize is the largest SOAP envelope sent, in bytes. Send
	// messages are sized to fill it; the transport halves it when the host
	// refuses a message as too large.
	MaxEnvelopeSize int

	// AgentPath is where the agent lives on the host: a versioned path
	// without spaces.
	AgentPath string
	// AgentArgs follow `agent` on the agent's command line.
	AgentArgs []string
	// AgentBinary is the local file wsu_agent_binary names as the agent;
	// "" deploys the run's windows/amd64 build (Dialer.Agents).
	AgentBinary string
	// Agent is the build uploaded as the agent; Dialer.Dial sets it, and
	// Connect makes it the AgentBinary file when it is nil.
	Agent *agentbin.Binary

	// Warnings are what ConfigFromVars found the user must see (plain
	// HTTP); Connect reports them through the context's notify hook.
	Warnings []string
}

// Defaults, as Ansible's winrm connection has them.
const (
	DefaultReadTimeout      = 30 * time.Second
	DefaultOperationTimeout = 20 * time.Second
	// DefaultMaxEnvelopeSize is Windows' default MaxEnvelopeSizekb (500)
	// since Windows Server 2012.
	DefaultMaxEnvelopeSize = 500 * 1024
	// minEnvelopeSize is the least WS-Management allows (DSP0226 6.2).
	minEnvelopeSize = 8192
)

// DefaultAgentPath is where the agent of this wsu version is kept.
func DefaultAgentPath() string {
	v := regexp.MustCompile(`[^A-Za-z0-9._-]`).ReplaceAllString(version.Version, "_")
	return `C:\k\wsu\wsu-` + v + `.exe`
}

// safePath is an absolute Windows path that needs no quoting in cmd.exe or
// inside PowerShell single quotes.
var safePath = regexp.MustCompile(`^[A-Za-z]:\\[A-Za-z0-9._\\-]+\.[Ee][Xx][Ee]$`)

// safeArg is an agent argument that means the same to cmd.exe and to the
// agent's argument parser.
var safeArg = regexp.MustCompile(`^[A-Za-z0-9._:=,/\\+-]+$`)

// Variable names: Ansible's, and wsu's own for settings Ansible lacks.
var (
	varHost             = []string{"ansible_host"}
	varUser             = []string{"ansible_user"}
	varPassword         = []string{"ansible_password"}
	varPort             = []string{"ansible_port"}
	varScheme           = []string{"ansible_winrm_scheme"}
	varEncryption       = []string{"ansible_winrm_message_encryption"}
	varTransport        = []string{"ansible_winrm_transport"}
	varCertValidation   = []string{"ansible_winrm_server_cert_validation"}
	varCAFiles          = []string{"winrm_ca_file", "ansible_winrm_ca_trust_path"}
	varReadTimeout      = []string{"ansible_winrm_read_timeout_sec"}
	varOperationTimeout = []string{"ansible_winrm_operation_timeout_sec"}
	varMaxEnvelopeSize  = []string{"winrm_max_envelope_size"}
	varRemoteOS         = []string{"wsu_remote_os"}
	varAgentPath        = []string{"wsu_agent_path"}
	varAgentArgs        = []string{"wsu_agent_args"}
	varAgentBinary      = []string{"wsu_agent_binary"}
)

// ConfigFromVars reads a host's inventory variables. Ansible's names are
// accepted so an Ansible inventory works unchanged. Errors name the
// variable and where it was set.
func ConfigFromVars(name string, vars map[string]inventory.Var) (Config, error) {
	r := hostvars.New(vars)
	cfg := Config{Name: name, Host: r.Str(varHost, "")}
	if cfg.Host == "" {
		cfg.Host = name
	}
	cfg.User = r.Str(varUser, "")
	cfg.Password = r.Raw(varPassword, "")
	readScheme(r, &cfg)
	cfg.Port = r.Port(varPort, defaultPort(cfg.HTTPS))

	switch v := r.Str(varTransport, "ntlm"); strings.ToLower(v) {
	case "ntlm", "basic":
		cfg.Auth = strings.ToLower(v)
	default:
		r.Failf(varTransport, "%q is not supported: use ntlm or basic", v)
	}
	switch v := r.Str(varCertValidation, "validate"); strings.ToLower(v) {
	case "validate":
	case "ignore":
		cfg.Insecure = true
	default:
		r.Failf(varCertValidation, "must be validate or ignore, not %q", v)
	}
	cfg.CAPEM = readCA(r)
	cfg.ReadTimeout = r.Seconds(varReadTimeout, DefaultReadTimeout)
	cfg.OperationTimeout = r.Seconds(varOperationTimeout, DefaultOperationTimeout)
	if cfg.ReadTimeout <= cfg.OperationTimeout && r.Err() == nil {
		r.Failf(varReadTimeout, "(%s) must exceed ansible_winrm_operation_timeout_sec (%s): "+
			"the host holds a Receive open for the operation timeout", cfg.ReadTimeout, cfg.OperationTimeout)
	}
	cfg.MaxEnvelopeSize = r.IntIn(varMaxEnvelopeSize, DefaultMaxEnvelopeSize, minEnvelopeSize, math.MaxInt32)

	if v := r.Str(varRemoteOS, "windows"); !strings.EqualFold(v, "windows") {
		r.Failf(varRemoteOS, "is %q, but the winrm transport manages Windows hosts only", v)
	}
	if cfg.AgentPath = r.Str(varAgentPath, ""); cfg.AgentPath == "" {
		cfg.AgentPath = DefaultAgentPath()
	}
	if !safePath.MatchString(cfg.AgentPath) && r.Err() == nil {
		r.Failf(varAgentPath, "%q must be an absolute Windows path to an .exe of letters, digits, '.', '_', '-' and '\\' (no spaces or quotes)", cfg.AgentPath)
	}
	cfg.AgentArgs = r.List(varAgentArgs)
	for _, a := range cfg.AgentArgs {
		if !safeArg.MatchString(a) {
			r.Failf(varAgentArgs, "argument %q has characters cmd.exe would interpret", a)
			break
		}
	}
	cfg.AgentBinary = r.Str(varAgentBinary, "")
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// defaultPort is WinRM's port for the scheme.
func defaultPort(https bool) int {
	if https {
		return 5986
	}
	return 5985
}

// readScheme sets HTTPS, the default whatever the port. Ansible picks http
// for port 5985; wsu does not, because wsu does not implement WinRM message
// encryption, which is what keeps pywinrm's http private
// (ansible_winrm_message_encryption "auto" encrypts NTLM messages over
// http). So plain HTTP takes both an explicit scheme and Ansible's own word
// for unencrypted messages, and is warned about.
func readScheme(r *hostvars.Reader, cfg *Config) {
	v := r.Str(varScheme, "https")
	scheme := strings.ToLower(v)
	if scheme != "https" && scheme != "http" {
		r.Failf(varScheme, "must be https or http, not %q", v)
	}
	cfg.HTTPS = scheme == "https"
	v = r.Str(varEncryption, "auto")
	encryption := strings.ToLower(v)
	switch encryption {
	case "auto", "never":
	case "always":
		r.Fail(varEncryption, "is always, but wsu does not implement WinRM message encryption: use HTTPS (the default scheme) for an encrypted connection")
	default:
		r.Failf(varEncryption, "must be auto, always or never, not %q", v)
	}
	switch {
	case cfg.HTTPS:
	case encryption != "never":
		r.Fail(varScheme, "is http, which would send every message, and with ansible_winrm_transport=basic the password, "+
			"unencrypted: wsu does not implement the WinRM message encryption Ansible uses over http. Use HTTPS (port 5986), "+
			"or accept plain text explicitly with ansible_winrm_message_encryption=never (the host needs AllowUnencrypted=true)")
	default:
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("WinRM over plain HTTP (%sansible_winrm_scheme=http, ansible_winrm_message_encryption=never): "+
			"commands, files and credentials go to %s unencrypted", r.Where(varScheme), cfg.Name))
	}
}

// readCA reads the CA certificates the first non-empty of winrm_ca_file and
// ansible_winrm_ca_trust_path names; nil means the system roots.
func readCA(r *hostvars.Reader) []byte {
	for _, k := range varCAFiles {
		names := []string{k}
		file := r.Str(names, "")
		if file == "" {
			continue
		}
		pem, err := os.ReadFile(file)
		switch {
		case err != nil:
			r.Failf(names, "%v", err)
		case !strings.Contains(string(pem), "-----BEGIN CERTIFICATE-----"):
			r.Failf(names, "%s holds no PEM certificate", file)
		}
		return pem
	}
	return nil
}
