package winrm

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/inventory"
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

// ConfigFromVars reads a host's inventory variables. Ansible's names are
// accepted so an Ansible inventory works unchanged.
func ConfigFromVars(name string, vars map[string]inventory.Var) (Config, error) {
	cfg := Config{
		Name:             name,
		Host:             name,
		Auth:             "ntlm",
		ReadTimeout:      DefaultReadTimeout,
		OperationTimeout: DefaultOperationTimeout,
		MaxEnvelopeSize:  DefaultMaxEnvelopeSize,
		AgentPath:        DefaultAgentPath(),
	}
	r := reader{vars: vars}
	if v, ok := r.str("ansible_host"); ok && v != "" {
		cfg.Host = v
	}
	cfg.User, _ = r.str("ansible_user")
	cfg.Password, _ = r.str("ansible_password")

	port, portSet := r.integer("ansible_port", 1, 65535)
	// HTTPS whatever the port. Ansible picks http for port 5985; wsu does
	// not, because wsu does not implement WinRM message encryption, which
	// is what keeps pywinrm's http private (ansible_winrm_message_encryption
	// "auto" encrypts NTLM messages over http). So plain HTTP takes both an
	// explicit scheme and Ansible's own word for unencrypted messages.
	scheme := "https"
	if v, ok := r.str("ansible_winrm_scheme"); ok {
		scheme = strings.ToLower(strings.TrimSpace(v))
		if scheme != "https" && scheme != "http" {
			r.fail("ansible_winrm_scheme", "must be https or http, not %q", v)
		}
	}
	cfg.HTTPS = scheme == "https"
	encryption := "auto"
	if v, ok := r.str("ansible_winrm_message_encryption"); ok {
		switch encryption = strings.ToLower(strings.TrimSpace(v)); encryption {
		case "auto", "never":
		case "always":
			r.fail("ansible_winrm_message_encryption", "is always, but wsu does not implement WinRM message encryption: use HTTPS (the default scheme) for an encrypted connection")
		default:
			r.fail("ansible_winrm_message_encryption", "must be auto, always or never, not %q", v)
		}
	}
	if !cfg.HTTPS && encryption != "never" {
		r.fail("ansible_winrm_scheme", "is http, which would send every message, and with ansible_winrm_transport=basic the password, "+
			"unencrypted: wsu does not implement the WinRM message encryption Ansible uses over http. Use HTTPS (port 5986), "+
			"or accept plain text explicitly with ansible_winrm_message_encryption=never (the host needs AllowUnencrypted=true)")
	}
	if !cfg.HTTPS && encryption == "never" {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("WinRM over plain HTTP (%sansible_winrm_scheme=http, ansible_winrm_message_encryption=never): "+
			"commands, files and credentials go to %s unencrypted", r.where("ansible_winrm_scheme"), name))
	}
	switch {
	case portSet:
		cfg.Port = port
	case cfg.HTTPS:
		cfg.Port = 5986
	default:
		cfg.Port = 5985
	}

	if v, ok := r.str("ansible_winrm_transport"); ok {
		switch t := strings.ToLower(strings.TrimSpace(v)); t {
		case "ntlm", "basic":
			cfg.Auth = t
		default:
			r.fail("ansible_winrm_transport", "%q is not supported: use ntlm or basic", v)
		}
	}
	if v, ok := r.str("ansible_winrm_server_cert_validation"); ok {
		switch strings.ToLower(v) {
		case "validate":
		case "ignore":
			cfg.Insecure = true
		default:
			r.fail("ansible_winrm_server_cert_validation", "must be validate or ignore, not %q", v)
		}
	}
	for _, k := range []string{"winrm_ca_file", "ansible_winrm_ca_trust_path"} {
		if v, ok := r.str(k); ok && v != "" {
			pem, err := os.ReadFile(v)
			switch {
			case err != nil:
				r.fail(k, "%v", err)
			case !strings.Contains(string(pem), "-----BEGIN CERTIFICATE-----"):
				r.fail(k, "%s holds no PEM certificate", v)
			}
			cfg.CAPEM = pem
			break
		}
	}
	if d, ok := r.seconds("ansible_winrm_read_timeout_sec"); ok {
		cfg.ReadTimeout = d
	}
	if d, ok := r.seconds("ansible_winrm_operation_timeout_sec"); ok {
		cfg.OperationTimeout = d
	}
	if cfg.ReadTimeout <= cfg.OperationTimeout && r.err == nil {
		r.fail("ansible_winrm_read_timeout_sec", "(%s) must exceed ansible_winrm_operation_timeout_sec (%s): "+
			"the host holds a Receive open for the operation timeout", cfg.ReadTimeout, cfg.OperationTimeout)
	}
	if n, ok := r.integer("winrm_max_envelope_size", minEnvelopeSize, math.MaxInt32); ok {
		cfg.MaxEnvelopeSize = n
	}

	if v, ok := r.str("wsu_remote_os"); ok && !strings.EqualFold(v, "windows") {
		r.fail("wsu_remote_os", "is %q, but the winrm transport manages Windows hosts only", v)
	}
	if v, ok := r.str("wsu_agent_path"); ok && v != "" {
		cfg.AgentPath = v
	}
	if !safePath.MatchString(cfg.AgentPath) && r.err == nil {
		r.fail("wsu_agent_path", "%q must be an absolute Windows path to an .exe of letters, digits, '.', '_', '-' and '\\' (no spaces or quotes)", cfg.AgentPath)
	}
	if args, ok := r.list("wsu_agent_args"); ok {
		for _, a := range args {
			if !safeArg.MatchString(a) {
				r.fail("wsu_agent_args", "argument %q has characters cmd.exe would interpret", a)
				break
			}
		}
		cfg.AgentArgs = args
	}
	if v, ok := r.str("wsu_agent_binary"); ok && v != "" {
		cfg.AgentBinary = v
	}
	if r.err != nil {
		return Config{}, r.err
	}
	return cfg, nil
}

// reader reads typed inventory variables, keeping the first error with the
// place the variable was set.
type reader struct {
	vars map[string]inventory.Var
	err  error
}

// where is "file:line:col: " for where key was set, or "".
func (r *reader) where(key string) string {
	if v, ok := r.vars[key]; ok && v.Range.Filename != "" {
		return v.Range.String() + ": "
	}
	return ""
}

func (r *reader) fail(key, format string, args ...any) {
	if r.err != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if v, ok := r.vars[key]; ok && v.Range.Filename != "" {
		r.err = fmt.Errorf("%s: %s %s", v.Range, key, msg)
		return
	}
	r.err = fmt.Errorf("%s %s", key, msg)
}

// str returns a variable as a string; numbers and bools are spelled out,
// as in an INI inventory.
func (r *reader) str(key string) (string, bool) {
	v, ok := r.vars[key]
	if !ok || v.Value.IsNull() || !v.Value.IsKnown() {
		return "", false
	}
	switch t := v.Value.Type(); t {
	case cty.String:
		return v.Value.AsString(), true
	case cty.Number:
		return v.Value.AsBigFloat().Text('f', -1), true
	case cty.Bool:
		return strconv.FormatBool(v.Value.True()), true
	}
	r.fail(key, "must be a string, not %s", v.Value.Type().FriendlyName())
	return "", false
}

func (r *reader) integer(key string, lo, hi int) (int, bool) {
	s, ok := r.str(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < lo || n > hi {
		r.fail(key, "must be a whole number from %d to %d, not %q", lo, hi, s)
		return 0, false
	}
	return n, true
}

func (r *reader) seconds(key string) (time.Duration, bool) {
	s, ok := r.str(key)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f <= 0 || f > 24*3600 {
		r.fail(key, "must be a positive number of seconds, not %q", s)
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// list reads a list of strings, or a string split at spaces.
func (r *reader) list(key string) ([]string, bool) {
	v, ok := r.vars[key]
	if !ok || v.Value.IsNull() || !v.Value.IsKnown() {
		return nil, false
	}
	t := v.Value.Type()
	if t.IsTupleType() || t.IsListType() {
		var out []string
		for it := v.Value.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() || !e.IsKnown() || e.Type() != cty.String {
				r.fail(key, "must be a list of strings")
				return nil, false
			}
			out = append(out, e.AsString())
		}
		return out, true
	}
	s, ok := r.str(key)
	if !ok {
		return nil, false
	}
	return strings.Fields(s), true
}
