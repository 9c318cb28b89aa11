//go:build linux

// Package sshdtest runs a real OpenSSH sshd (Debian's openssh-server) for
// tests: on 127.0.0.1 and a free port, with its own config, host keys,
// authorized_keys file and log, as the current user. It installs the package
// when it is missing and the test runs as root.
//
// How it runs:
//   - sshd is started as `/usr/sbin/sshd -D -e -f <config>` (an absolute
//     path: sshd re-executes itself). As root it needs its privilege
//     separation directory /run/sshd, which is created if missing.
//   - UsePAM is off, so sshd checks passwords against /etc/shadow itself and
//     needs no PAM stack; StrictModes is off, so the temp files it reads
//     may live under /tmp. Options.KbdInteractiveOnly is the exception: on
//     Linux sshd offers keyboard-interactive only through PAM, so that sshd
//     uses a PAM service of its own (PAMService, written to /etc/pam.d).
//   - Root's password is never touched. Password tests log in as a
//     dedicated local user, "wsutest", created on first use (useradd) with a
//     random password set by chpasswd and kept, mode 0600, in
//     ~/.cache/wsu/sshd so later runs reuse it. Without root there is no
//     such user and PasswordUser fails the test, naming the fix.
//   - SFTP is internal-sftp (sftp-server's code inside sshd) unless
//     Options.ExternalSFTP: the external sftp-server is started through the
//     user's login shell, whose rc files can take seconds (every exec pays
//     that too). Options.NoSFTP leaves the subsystem out: SFTP is refused.
//   - sshd logs at VERBOSE to a file; the test's cleanup stops sshd and, if
//     the test failed, prints the log.
package sshdtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHD is where Debian installs the server.
const SSHD = "/usr/sbin/sshd"

// InstallCommand installs the server; InstallClientCommand the client.
const (
	InstallCommand       = "apt-get update && apt-get install -y --no-install-recommends openssh-server"
	InstallClientCommand = "apt-get update && apt-get install -y --no-install-recommends openssh-client"
)

// PasswordUserName is the local user password tests log in as.
const PasswordUserName = "wsutest"

var install struct {
	mu      sync.Mutex
	updated bool // apt-get update ran in this process
}

// EnsureServer installs openssh-server unless sshd is there already.
func EnsureServer(t testing.TB) {
	t.Helper()
	if err := ensurePackage(SSHD, "openssh-server", InstallCommand); err != nil {
		t.Fatal(err)
	}
}

// EnsureClient installs openssh-client unless ssh is on PATH, and returns
// the path of ssh.
func EnsureClient(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("ssh"); err == nil {
		return p
	}
	if err := ensurePackage("/usr/bin/ssh", "openssh-client", InstallClientCommand); err != nil {
		t.Fatal(err)
	}
	return "/usr/bin/ssh"
}

// ensurePackage installs pkg (as root) unless binary exists.
func ensurePackage(binary, pkg, command string) error {
	install.mu.Lock()
	defer install.mu.Unlock()
	if _, err := os.Stat(binary); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is missing and this process is not running as root; install it with:\n  sudo sh -c '%s'", pkg, command)
	}
	if !install.updated {
		if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get update: %v\n%s", err, out)
		}
		install.updated = true
	}
	cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %v\n%s", pkg, err, out)
	}
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("%s is still missing after installing %s", binary, pkg)
	}
	return nil
}

// Server is one running sshd.
type Server struct {
	Host string // 127.0.0.1
	Port int
	// Addr is Host:Port.
	Addr string
	// User is the account the current process runs as, which key tests log
	// in as.
	User string
	// HostKeys are the server's public host keys (ed25519 and RSA).
	HostKeys []ssh.PublicKey
	// AuthorizedKeys is the file sshd reads for every user.
	AuthorizedKeys string
	// LogFile holds sshd's VERBOSE log.
	LogFile string
	// Dir holds the config, keys, pid file and log.
	Dir string

	config   string
	binary   string // SSHD, or a symlink to it (KbdInteractiveOnly)
	kbdint   bool
	sftp     string
	setEnv   []string
	limits   string // MaxStartups / MaxSessions lines
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
}

// Options change how Start runs sshd.
type Options struct {
	// ExternalSFTP serves SFTP with the separate sftp-server program, as
	// Windows OpenSSH does (sftp-server.exe), instead of internal-sftp.
	// sshd starts it through the user's login shell, so each SFTP session
	// pays the shell's start-up.
	ExternalSFTP bool
	// SetEnv are environment variables (NAME=VALUE) sshd sets in every
	// session, so programs a login starts see them (sshd_config SetEnv).
	SetEnv []string
	// NoSFTP leaves the Subsystem line out of sshd_config, so SFTP is
	// refused, as on a Windows host whose administrator removed it.
	NoSFTP bool
	// KbdInteractiveOnly allows keyboard-interactive authentication only
	// (AuthenticationMethods keyboard-interactive). On Linux sshd answers
	// it only through PAM, so this sshd runs with UsePAM yes and the PAM
	// service PAMService (pam_unix: the password in /etc/shadow), which it
	// writes to /etc/pam.d as root. sshd names its PAM service after its
	// program name, so it runs through a symlink called PAMService; the
	// system's own "sshd" service is not touched.
	KbdInteractiveOnly bool
	// AuthorizedKeysFile is the file sshd reads every user's keys from
	// (default: authorized_keys in Dir), e.g. the one a simulated
	// Windows host keeps, so a test sees what a playbook wrote there. An
	// existing file is kept; a missing one is created empty.
	AuthorizedKeysFile string
	// MaxStartups and MaxSessions, when set, replace sshd's defaults
	// (10:30:100: unauthenticated connections beyond 10 are dropped at
	// random; 10 sessions per connection), for many hosts behind one sshd.
	MaxStartups string
	MaxSessions int
}

// PAMService is the PAM service of a KbdInteractiveOnly sshd.
const PAMService = "wsu-sshdtest-kbdint"

const pamConfig = `# Written by wsu's test/sshd (sshdtest) for its keyboard-interactive test sshd.
auth     required pam_unix.so
account  required pam_unix.so
session  required pam_permit.so
password required pam_deny.so
`

// ensurePAMService writes /etc/pam.d/PAMService unless it holds pamConfig.
func ensurePAMService() error {
	file := filepath.Join("/etc/pam.d", PAMService)
	if b, err := os.ReadFile(file); err == nil && string(b) == pamConfig {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("a keyboard-interactive sshd needs the PAM service %s, which only root can write: run the tests as root (CI does), or write this to it:\n%s", file, pamConfig)
	}
	return os.WriteFile(file, []byte(pamConfig), 0o644)
}

// Start runs a new sshd; the test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("sshd log (%s):\n%s", s.LogFile, s.Log())
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// New runs a new sshd for a program that is not a test (the demo); the
// caller ends it with Close. It installs openssh-server when missing and
// running as root.
func New(opts Options) (*Server, error) {
	if err := ensurePackage(SSHD, "openssh-server", InstallCommand); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start as root without its privsep directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, fmt.Errorf("creating /run/sshd: %v", err)
		}
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("current user: %v", err)
	}
	// Not a test's TempDir, whose parent is 0700: sshd reads
	// authorized_keys as the target user (wsutest too).
	dir, err := os.MkdirTemp("", "sshdtest-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		Host:           "127.0.0.1",
		User:           u.Username,
		Dir:            dir,
		AuthorizedKeys: filepath.Join(dir, "authorized_keys"),
		LogFile:        filepath.Join(dir, "sshd.log"),
		sftp:           "internal-sftp",
	}
	if opts.AuthorizedKeysFile != "" {
		s.AuthorizedKeys = opts.AuthorizedKeysFile
	}
	if opts.ExternalSFTP {
		s.sftp = "/usr/lib/openssh/sftp-server"
	}
	if opts.NoSFTP {
		s.sftp = ""
	}
	s.setEnv = opts.SetEnv
	if opts.MaxStartups != "" {
		s.limits += fmt.Sprintf("MaxStartups %s\n", opts.MaxStartups)
	}
	if opts.MaxSessions > 0 {
		s.limits += fmt.Sprintf("MaxSessions %d\n", opts.MaxSessions)
	}
	s.binary = SSHD
	if opts.KbdInteractiveOnly {
		s.kbdint = true
		s.binary = filepath.Join(dir, PAMService)
		if err := ensurePAMService(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Symlink(SSHD, s.binary); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.setUp(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops sshd and removes its directory.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.Dir)
}

func (s *Server) setUp() error {
	f, err := os.OpenFile(s.AuthorizedKeys, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	var hostKeys []string
	for _, typ := range []string{"ed25519", "rsa"} {
		path := filepath.Join(s.Dir, "ssh_host_"+typ+"_key")
		args := []string{"-q", "-t", typ, "-N", "", "-C", "sshdtest", "-f", path}
		if typ == "rsa" {
			args = append(args, "-b", "3072")
		}
		if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ssh-keygen: %v\n%s", err, out)
		}
		pub, err := readPublicKey(path + ".pub")
		if err != nil {
			return err
		}
		s.HostKeys = append(s.HostKeys, pub)
		hostKeys = append(hostKeys, path)
	}

	// A free port can be taken between probing and binding: try again.
	for attempt := 1; ; attempt++ {
		err := s.start(hostKeys)
		if err == nil {
			return nil
		}
		if attempt == 3 || !strings.Contains(s.Log(), "Address already in use") {
			return fmt.Errorf("starting sshd: %v\nlog:\n%s", err, s.Log())
		}
	}
}

func (s *Server) start(hostKeys []string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port = port
	s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(port))
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "Port %d\nListenAddress %s\n", port, s.Host)
	for _, k := range hostKeys {
		fmt.Fprintf(&cfg, "HostKey %s\n", k)
	}
	if s.kbdint {
		cfg.WriteString("PubkeyAuthentication no\nPasswordAuthentication no\nKbdInteractiveAuthentication yes\nUsePAM yes\nAuthenticationMethods keyboard-interactive\n")
	} else {
		cfg.WriteString("PubkeyAuthentication yes\nPasswordAuthentication yes\nKbdInteractiveAuthentication no\nUsePAM no\n")
	}
	fmt.Fprintf(&cfg, `PidFile %s
AuthorizedKeysFile %s
PermitRootLogin yes
PermitEmptyPasswords no
StrictModes no
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
`, filepath.Join(s.Dir, "sshd.pid"), s.AuthorizedKeys)
	if s.sftp != "" {
		fmt.Fprintf(&cfg, "Subsystem sftp %s\n", s.sftp)
	}
	for _, kv := range s.setEnv {
		fmt.Fprintf(&cfg, "SetEnv %q\n", kv)
	}
	cfg.WriteString(s.limits)
	s.config = filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(s.config, []byte(cfg.String()), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command(s.binary, "-t", "-f", s.config).CombinedOutput(); err != nil {
		return fmt.Errorf("sshd -t rejects the config: %v\n%s", err, out)
	}
	return s.run()
}

// run starts sshd with the written config and waits for its banner.
func (s *Server) run() error {
	log, err := os.OpenFile(s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(s.binary, "-D", "-e", "-f", s.config)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	return s.waitReady(10 * time.Second)
}

// Restart starts sshd again on the same port after Stop, as a host coming
// back from a reboot.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.run(); err != nil {
		t.Fatalf("restarting sshd: %v\nlog:\n%s", err, s.Log())
	}
	s.stopOnce = sync.Once{}
}

// waitReady waits until sshd sends its banner.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("sshd exited: %v", s.cmd.ProcessState)
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-2.0-") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("sshd did not answer on %s within %s (last error: %v)", s.Addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop ends sshd (SIGTERM, then SIGKILL after 5 s). Sessions already open
// run in their own processes and end when their connections close.
func (s *Server) Stop() {
	s.stopOnce.Do(s.kill)
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Log returns what sshd logged so far.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// Authorize lets the holder of key log in (as any user).
func (s *Server) Authorize(t testing.TB, key ssh.PublicKey) {
	t.Helper()
	if err := s.AuthorizeKey(key); err != nil {
		t.Fatal(err)
	}
}

// AuthorizeKey is Authorize for programs that are not tests.
func (s *Server) AuthorizeKey(key ssh.PublicKey) error {
	f, err := os.OpenFile(s.AuthorizedKeys, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(ssh.MarshalAuthorizedKey(key))
	return err
}

// KnownHostsLines are the server's keys as known_hosts lines.
func (s *Server) KnownHostsLines() []string {
	var lines []string
	for _, k := range s.HostKeys {
		lines = append(lines, fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))))
	}
	return lines
}

// AppendKnownHosts adds the server's keys to a known_hosts file, creating
// it if needed.
func (s *Server) AppendKnownHosts(t testing.TB, path string) {
	t.Helper()
	if err := s.WriteKnownHosts(path); err != nil {
		t.Fatal(err)
	}
}

// WriteKnownHosts is AppendKnownHosts for programs that are not tests.
func (s *Server) WriteKnownHosts(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(s.KnownHostsLines(), "\n") + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Key is a client key pair written by ssh-keygen.
type Key struct {
	File   string // the private key
	Public ssh.PublicKey
}

// KeyOptions choose what NewKey generates.
type KeyOptions struct {
	Type       string // "ed25519" (default), "rsa", "ecdsa"
	Passphrase string // encrypts the private key when set
	PEM        bool   // the legacy PEM format instead of OpenSSH's own
}

// NewKey generates a client key with ssh-keygen into dir.
func NewKey(t testing.TB, dir string, opts KeyOptions) Key {
	t.Helper()
	k, err := GenerateKey(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// GenerateKey is NewKey for programs that are not tests.
func GenerateKey(dir string, opts KeyOptions) (Key, error) {
	if opts.Type == "" {
		opts.Type = "ed25519"
	}
	file := filepath.Join(dir, "id_"+opts.Type+"_"+randomHex(4))
	args := []string{"-q", "-t", opts.Type, "-N", opts.Passphrase, "-C", "sshdtest-client", "-f", file}
	if opts.PEM {
		args = append(args, "-m", "PEM")
	}
	if opts.Type == "rsa" {
		args = append(args, "-b", "3072")
	}
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		return Key{}, fmt.Errorf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := readPublicKey(file + ".pub")
	if err != nil {
		return Key{}, err
	}
	return Key{File: file, Public: pub}, nil
}

func readPublicKey(path string) (ssh.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	return k, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// PasswordUser returns the local user and password that password
// authentication accepts, creating the user on first use. It needs root;
// otherwise the test fails, saying how to fix it (never a silent skip).
func PasswordUser(t testing.TB) (name, password string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("password authentication needs the local user %q, which only root can create: run the tests as root (CI does), or create the user yourself: useradd -m %s", PasswordUserName, PasswordUserName)
	}
	passwordUser.once.Do(func() { passwordUser.pw, passwordUser.err = ensurePasswordUser() })
	if passwordUser.err != nil {
		t.Fatalf("preparing the password user: %v", passwordUser.err)
	}
	return PasswordUserName, passwordUser.pw
}

var passwordUser struct {
	once sync.Once
	pw   string
	err  error
}

func ensurePasswordUser() (string, error) {
	if _, err := user.Lookup(PasswordUserName); err != nil {
		if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", PasswordUserName).CombinedOutput(); err != nil {
			return "", fmt.Errorf("useradd: %v: %s", err, out)
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(home, ".cache", "wsu", "sshd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	file := filepath.Join(dir, PasswordUserName+".password")
	pw := "wsu-" + randomHex(12)
	// Keep the first process's password so parallel test binaries agree.
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	switch {
	case err == nil:
		_, err = f.WriteString(pw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	case errors.Is(err, os.ErrExist):
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		pw = strings.TrimSpace(string(b))
	default:
		return "", err
	}
	// Always set it: the user may have been recreated since.
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(PasswordUserName + ":" + pw + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chpasswd: %v: %s", err, out)
	}
	return pw, nil
}

// UserDir creates a temp directory owned by the password user (for what it
// uploads and runs); the test's cleanup removes it.
func UserDir(t testing.TB) string {
	t.Helper()
	PasswordUser(t)
	dir, err := NewUserDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FastUser returns the user to log in as for speed, and a fresh directory
// it owns, for programs that are not tests (the demo, benchmarks): as root
// the password user, whose /bin/sh starts at once where root's rc files may
// take seconds; otherwise the current user. The caller removes dir.
func FastUser() (name, dir string, err error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return "", "", err
		}
		dir, err := os.MkdirTemp("", "sshdtest-"+u.Username+"-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		return u.Username, dir, err
	}
	passwordUser.once.Do(func() { passwordUser.pw, passwordUser.err = ensurePasswordUser() })
	if passwordUser.err != nil {
		return "", "", fmt.Errorf("preparing the user %s: %v", PasswordUserName, passwordUser.err)
	}
	dir, err = NewUserDir()
	return PasswordUserName, dir, err
}

// NewUserDir creates a temp directory owned by the password user.
func NewUserDir() (string, error) {
	u, err := user.Lookup(PasswordUserName)
	if err != nil {
		return "", err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "sshdtest-"+PasswordUserName+"-")
	if err != nil {
		return "", err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
