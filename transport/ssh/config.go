package ssh

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/hostvars"
	"github.com/wsu-project/wsu/notify"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/version"
)

// Defaults of the connection settings.
const (
	DefaultPort               = 22
	DefaultConnectTimeout     = 30 * time.Second
	DefaultConnectRetryWindow = 5 * time.Minute
	DefaultAuthRetryWindow    = 2 * time.Minute
	DefaultKeepaliveInterval  = 15 * time.Second
	DefaultKeepaliveCountMax  = 3
	DefaultOpTimeout          = 30 * time.Minute
)

// PassphraseEnv holds the passphrase of an encrypted private key; without
// it only a CLI on a terminal asks (Passphrases, per run).
const PassphraseEnv = "WSU_SSH_PASSPHRASE"

// Config is everything the SSH transport needs to reach one host, read from
// its inventory variables by ParseConfig.
type Config struct {
	// Name is the inventory name, used in messages.
	Name string
	Host string
	Port int
	User string

	// PrivateKeyFile (or PrivateKey, the key itself), Password and the
	// ssh-agent are the credentials. The agent is used only when neither a
	// key nor a password is set.
	PrivateKeyFile string
	// PrivateKey is an OpenSSH or PEM private key's text (ssh_private_key),
	// for inventories that carry the key rather than a path, such as a BYOH
	// windows-instances ConfigMap with its cloud-private-key Secret. It is a
	// secret: never print it.
	PrivateKey string
	Password   string

	// KnownHostsFile is checked (and, with TrustOnFirstUse, appended to)
	// unless HostKey pins the key.
	KnownHostsFile  string
	HostKey         gossh.PublicKey
	TrustOnFirstUse bool

	// ProxyJump, when set, is the bastion the connection goes through.
	ProxyJump *JumpHost

	// ConnectTimeout bounds one attempt (TCP connect and SSH handshake).
	ConnectTimeout time.Duration
	// ConnectRetryWindow is how long refused or timed-out connections are
	// retried; AuthRetryWindow (at most ConnectRetryWindow) how long
	// authentication failures are, for hosts whose keys or users are still
	// being provisioned.
	ConnectRetryWindow time.Duration
	AuthRetryWindow    time.Duration
	// KeepaliveInterval is how often keepalive@openssh.com is sent; with
	// no reply for KeepaliveInterval*KeepaliveCountMax the connection is
	// closed and counts as lost. 0 disables keepalives.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// OpTimeout bounds one host operation beyond its own timeout argument:
	// an operation that gets no answer by then means a stalled connection,
	// which is dropped and reported as lost. 0 disables it.
	OpTimeout time.Duration

	// RemoteOS is "windows" or "linux".
	RemoteOS string
	// AgentPath is where the agent binary lives on the host; it must not
	// contain spaces or shell characters, because the start command is
	// written without quotes (cmd and PowerShell quote differently).
	AgentPath string
	// AgentArgs are extra arguments after `agent`.
	AgentArgs []string
	// AgentBinary is the local file wsu_agent_binary names as the agent;
	// "" deploys the run's build for the host's platform (Dialer.Agents).
	AgentBinary string
	// Agent is the build uploaded as the agent; Dialer.Dial sets it, and
	// Connect makes it the AgentBinary file when it is nil.
	Agent *agentbin.Binary
	// UploadMethod is how payload files travel (wsu_upload_method, upload.go):
	// auto, agent or sftp.
	UploadMethod string

	// Notify receives what the user must see while connecting: a host key
	// recorded by trust on first use, each failed attempt that will be
	// retried, inventory options wsu ignores (Warnings). Dial sets it from
	// the context (notify.With); nil means notify.From(ctx) at Connect,
	// which writes to stderr when the context carries no hook.
	Notify notify.Func
	// Warnings are found by ParseConfig (options in ansible_ssh_*_args wsu
	// does not act on); Connect reports them through Notify.
	Warnings []string
}

// JumpHost is a bastion from proxy_jump ("user@host:port").
type JumpHost struct {
	User string
	Host string
	Port int
}

// Addr is host:port.
func (j JumpHost) Addr() string { return net.JoinHostPort(j.Host, strconv.Itoa(j.Port)) }

// Addr is the target's host:port.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// Variable names, wsu's first and then Ansible's. The address, port, user
// and password are Ansible's names only: an Ansible inventory's host
// variables host, port, user and password are the application's (a
// database's port=5432, user=appuser), and must not redirect the
// connection (docs/inventory.md, Connection settings).
var (
	varHost            = []string{"ansible_host", "ansible_ssh_host"}
	varPort            = []string{"ansible_port", "ansible_ssh_port"}
	varUser            = []string{"ansible_user", "ansible_ssh_user"}
	varKeyFile         = []string{"private_key_file", "ansible_ssh_private_key_file", "ansible_private_key_file"}
	varKey             = []string{"ssh_private_key"}
	varPassword        = []string{"ansible_password", "ansible_ssh_pass", "ansible_ssh_password"}
	varKnownHosts      = []string{"ssh_known_hosts_file"}
	varHostKey         = []string{"ssh_host_key"}
	varTOFU            = []string{"ssh_trust_on_first_use"}
	varProxyJump       = []string{"proxy_jump"}
	varConnectTimeout  = []string{"connect_timeout", "ansible_timeout"}
	varRetryWindow     = []string{"connect_retry_window"}
	varAuthRetryWindow = []string{"auth_retry_window"}
	varKeepalive       = []string{"keepalive_interval"}
	varKeepaliveCount  = []string{"keepalive_count_max"}
	varOpTimeout       = []string{"op_timeout"}
	varRemoteOS        = []string{"wsu_remote_os"}
	varAgentPath       = []string{"wsu_agent_path"}
	varAgentArgs       = []string{"wsu_agent_args"}
	varAgentBinary     = []string{"wsu_agent_binary"}
)

// ParseConfig reads a host's SSH settings from its inventory variables.
// Errors name the variable and where it was set.
func ParseConfig(name string, vars map[string]inventory.Var) (Config, error) {
	r := hostvars.New(vars)
	c := Config{
		Name:               name,
		Host:               r.Str(varHost, name),
		Port:               r.Port(varPort, DefaultPort),
		User:               r.Str(varUser, ""),
		PrivateKeyFile:     r.Path(varKeyFile, ""),
		PrivateKey:         r.Str(varKey, ""),
		Password:           r.Str(varPassword, ""),
		TrustOnFirstUse:    r.Bool(varTOFU, false),
		ConnectTimeout:     r.Duration(varConnectTimeout, DefaultConnectTimeout),
		ConnectRetryWindow: r.Duration(varRetryWindow, DefaultConnectRetryWindow),
		AuthRetryWindow:    r.Duration(varAuthRetryWindow, DefaultAuthRetryWindow),
		KeepaliveInterval:  r.Duration(varKeepalive, DefaultKeepaliveInterval),
		KeepaliveCountMax:  r.Int(varKeepaliveCount, DefaultKeepaliveCountMax),
		OpTimeout:          r.Duration(varOpTimeout, DefaultOpTimeout),
		RemoteOS:           strings.ToLower(r.Str(varRemoteOS, "windows")),
		AgentArgs:          r.List(varAgentArgs),
	}
	if c.User == "" {
		c.User = currentUser()
	}
	if c.ConnectTimeout <= 0 {
		r.Fail(varConnectTimeout, "must be more than 0")
	}
	c.AuthRetryWindow = min(c.AuthRetryWindow, c.ConnectRetryWindow)
	if c.KeepaliveCountMax < 1 {
		r.Fail(varKeepaliveCount, "must be at least 1")
	}

	if kh := r.Path(varKnownHosts, ""); kh != "" {
		c.KnownHostsFile = kh
	} else if home, err := os.UserHomeDir(); err == nil {
		c.KnownHostsFile = filepath.Join(home, ".ssh", "known_hosts")
	}
	if c.PrivateKey != "" {
		if c.PrivateKeyFile != "" {
			r.Fail(varKey, "and a private key file ("+c.PrivateKeyFile+") are both set; give the key one way")
		} else if _, err := parseKey([]byte(c.PrivateKey), nil); err != nil && !isPassphraseMissing(err) {
			// Checked now so the inventory's mistake is named before any
			// connection; the error never quotes the key.
			r.Fail(varKey, fmt.Sprintf("is not a private key (OpenSSH or PEM): %v", err))
		}
	}
	if s := r.Str(varHostKey, ""); s != "" {
		k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(s))
		if err != nil {
			r.Fail(varHostKey, fmt.Sprintf("is not a public key in authorized_keys format (\"ssh-ed25519 AAAA...\"): %v", err))
		}
		c.HostKey = k
	}
	if s := r.Str(varProxyJump, ""); s != "" {
		j, err := parseJump(s, c.User)
		if err != nil {
			r.Fail(varProxyJump, err.Error())
		}
		c.ProxyJump = j
	}
	// Ansible's ssh arguments: a jump host there counts unless proxy_jump
	// is set; other options are errors or warnings (sshargs.go).
	ansibleSSHArgs(r, &c)

	switch c.RemoteOS {
	case "windows", "linux":
	default:
		r.Fail(varRemoteOS, fmt.Sprintf("must be windows or linux, not %q", c.RemoteOS))
	}
	c.AgentPath = r.Str(varAgentPath, defaultAgentPath(c.RemoteOS))
	if err := validateAgentPath(c.RemoteOS, c.AgentPath); err != nil {
		r.Fail(varAgentPath, err.Error())
	}
	for _, a := range c.AgentArgs {
		if !safeArg.MatchString(a) {
			r.Fail(varAgentArgs, fmt.Sprintf("argument %q has characters wsu cannot pass unquoted to both cmd and PowerShell (allowed: letters, digits and %s)", a, safeArgPunct))
			break
		}
	}
	c.UploadMethod = uploadMethod(r)
	c.AgentBinary = r.Path(varAgentBinary, "")
	if err := r.Err(); err != nil {
		return Config{}, fmt.Errorf("host %s: %w", name, err)
	}
	return c, nil
}

// defaultAgentPath is versioned, so a new wsu never has to replace a binary
// an older run may still be executing (Windows locks running images).
func defaultAgentPath(remoteOS string) string {
	if remoteOS == "windows" {
		return `C:\k\wsu\wsu-` + version.Version + ".exe"
	}
	// Relative: the login user's home, for exec and SFTP alike.
	return ".wsu/wsu-" + version.Version
}

const safeArgPunct = `_ . , : / \ = + - @ %`

var (
	safeArg       = regexp.MustCompile(`^[A-Za-z0-9_.,:/\\=+@%-]+$`)
	safePathChars = regexp.MustCompile(`^[A-Za-z0-9_.:/\\+~-]+$`)
	winAbsPath    = regexp.MustCompile(`^[A-Za-z]:\\`)
)

// validateAgentPath insists on a path the start command can use unquoted.
func validateAgentPath(remoteOS, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("is empty")
	case strings.ContainsAny(p, " \t"):
		return fmt.Errorf("%q contains a space; the agent is started without quoting (Windows OpenSSH may run cmd or PowerShell), so choose a path without spaces, e.g. C:\\k\\wsu\\wsu.exe", p)
	case !safePathChars.MatchString(p):
		return fmt.Errorf("%q contains characters a shell would interpret; use letters, digits and _ . : / \\ + ~ -", p)
	case remoteOS == "windows" && !winAbsPath.MatchString(p):
		return fmt.Errorf("%q is not an absolute Windows path such as C:\\k\\wsu\\wsu.exe", p)
	case remoteOS == "windows" && strings.Contains(p, "/"):
		return fmt.Errorf("%q mixes / into a Windows path; use backslashes", p)
	}
	return nil
}

// parseJump reads "[user@]host[:port]"; the user defaults to the target's.
func parseJump(s, defUser string) (*JumpHost, error) {
	j := &JumpHost{User: defUser, Port: DefaultPort}
	if strings.Contains(s, ",") {
		return nil, fmt.Errorf("%q: only one jump host is supported", s)
	}
	s = strings.TrimPrefix(s, "ssh://")
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		j.User, s = s[:i], s[i+1:]
		if j.User == "" {
			return nil, fmt.Errorf("empty user before @")
		}
	}
	j.Host = s
	if h, p, err := net.SplitHostPort(s); err == nil {
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", s, p)
		}
		j.Host, j.Port = h, port
	} else if strings.Count(s, ":") == 1 {
		return nil, fmt.Errorf("%q: %v", s, err)
	}
	j.Host = strings.Trim(j.Host, "[]")
	if j.Host == "" {
		return nil, fmt.Errorf("no host in %q (want user@host:port)", s)
	}
	return j, nil
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}
