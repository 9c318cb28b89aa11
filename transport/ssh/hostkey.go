package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsu-project/wsu/notify"
)

// HostKeyError is a host key wsu refused. It is never retried: waiting
// does not make an unknown or changed key trustworthy.
type HostKeyError struct {
	Addr     string
	Offered  gossh.PublicKey
	Mismatch bool // a different key is known (or pinned) for Addr
	msg      string
}

func (e *HostKeyError) Error() string { return e.msg }

// hostKeyPolicy checks the key of one address: a pinned key when there is
// one, else the known hosts file, recording unknown keys only with TOFU.
type hostKeyPolicy struct {
	knownHosts string
	pinned     gossh.PublicKey
	tofu       bool
	// name (the inventory name) and notify report a key recorded by trust
	// on first use; jump is set for the jump host's key.
	name   string
	notify notify.Func
	jump   bool
}

// callback returns the HostKeyCallback for addr and the host key
// algorithms to ask for. Asking only for the types already known avoids a
// false mismatch when the server prefers a type the file lacks.
func (p hostKeyPolicy) callback(addr string) (gossh.HostKeyCallback, []string, error) {
	if p.pinned != nil {
		cb := func(_ string, _ net.Addr, key gossh.PublicKey) error {
			if keysEqual(key, p.pinned) {
				return nil
			}
			return &HostKeyError{Addr: addr, Offered: key, Mismatch: true, msg: fmt.Sprintf(
				"ssh: host key mismatch for %s: the host presented %s, but ssh_host_key pins %s. "+
					"If the host was reinstalled, update ssh_host_key in the inventory; otherwise the connection may be intercepted. wsu refused to connect.",
				addr, describeKey(key), describeKey(p.pinned))}
		}
		return cb, algorithmsFor([]gossh.PublicKey{p.pinned}), nil
	}

	db, err := p.load()
	if err != nil {
		return nil, nil, err
	}
	known := knownKeys(db, addr)
	cb := func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		err := db(hostname, remote, key)
		var ke *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ke) && len(ke.Want) > 0:
			var want []string
			for _, k := range ke.Want {
				want = append(want, fmt.Sprintf("%s (%s:%d)", describeKey(k.Key), k.Filename, k.Line))
			}
			return &HostKeyError{Addr: addr, Offered: key, Mismatch: true, msg: fmt.Sprintf(
				"ssh: host key mismatch for %s: the host presented %s, but the known hosts file expects %s. "+
					"If the host was reinstalled, remove the old entry with `ssh-keygen -R %s -f %s` and connect again; "+
					"otherwise the connection may be intercepted. wsu refused to connect.",
				addr, describeKey(key), strings.Join(want, " or "), shellQuote(knownhosts.Normalize(addr)), p.knownHosts)}
		case errors.As(err, &ke):
			if p.tofu {
				added, err := p.record(addr, key)
				if added {
					p.warnRecorded(addr, key)
				}
				return err
			}
			return &HostKeyError{Addr: addr, Offered: key, msg: unknownKeyMessage(addr, key, p.knownHosts)}
		default:
			var re *knownhosts.RevokedError
			if errors.As(err, &re) {
				return &HostKeyError{Addr: addr, Offered: key, Mismatch: true, msg: fmt.Sprintf(
					"ssh: the host key of %s (%s) is marked @revoked in %s:%d; wsu refused to connect", addr, describeKey(key), re.Revoked.Filename, re.Revoked.Line)}
			}
			return err
		}
	}
	return cb, algorithmsFor(known), nil
}

// load reads the known hosts file; a missing file is an empty one.
func (p hostKeyPolicy) load() (gossh.HostKeyCallback, error) {
	if p.knownHosts == "" {
		return knownhosts.New()
	}
	if _, err := os.Stat(p.knownHosts); errors.Is(err, fs.ErrNotExist) {
		return knownhosts.New()
	}
	cb, err := knownhosts.New(p.knownHosts)
	if err != nil {
		return nil, fmt.Errorf("reading the known hosts file (ssh_known_hosts_file): %w", err)
	}
	return cb, nil
}

// record appends an unknown key (trust on first use), creating the file
// 0600 and its directory 0700 as OpenSSH does. added is false when a
// parallel dial of the same host recorded it first.
func (p hostKeyPolicy) record(addr string, key gossh.PublicKey) (added bool, err error) {
	if p.knownHosts == "" {
		return false, fmt.Errorf("ssh_trust_on_first_use: no known hosts file to record %s's key in (set ssh_known_hosts_file)", addr)
	}
	if err := os.MkdirAll(filepath.Dir(p.knownHosts), 0o700); err != nil {
		return false, fmt.Errorf("ssh_trust_on_first_use: %w", err)
	}
	f, err := os.OpenFile(p.knownHosts, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return false, fmt.Errorf("ssh_trust_on_first_use: %w", err)
	}
	defer f.Close()
	// Appends to one file, from hosts dialled in parallel or from other
	// runs and processes, go one at a time: a lock on the file itself, not
	// one lock for every file of the process.
	if err := lockKnownHosts(f); err != nil {
		return false, fmt.Errorf("ssh_trust_on_first_use: locking %s: %w", p.knownHosts, err)
	}
	// A parallel dial of the same host may have recorded it meanwhile.
	if db, err := knownhosts.New(p.knownHosts); err == nil {
		if err := db(addr, &net.TCPAddr{}, key); err == nil {
			return false, nil
		}
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	if _, err := f.WriteString(line); err != nil {
		return false, fmt.Errorf("ssh_trust_on_first_use: recording the key: %w", err)
	}
	return true, nil
}

// warnRecorded says, as OpenSSH's "Permanently added ... to the list of
// known hosts" does, that trust on first use accepted and recorded a key:
// the one moment a man in the middle would go unnoticed.
func (p hostKeyPolicy) warnRecorded(addr string, key gossh.PublicKey) {
	if p.notify == nil {
		return
	}
	entry := knownhosts.Normalize(addr)
	what := "the host key of '" + entry + "'"
	if p.jump {
		what = "the host key of the jump host '" + entry + "'"
	}
	p.notify(notify.Notice{
		Kind: notify.Warning,
		Host: p.name,
		Summary: fmt.Sprintf("Permanently added %s (%s) to the list of known hosts %s",
			what, describeKey(key), p.knownHosts),
		Detail: fmt.Sprintf("ssh_trust_on_first_use=true accepted a key wsu had never seen for %s and wrote it to %s. "+
			"Compare %s with the host's own fingerprint (ssh-keygen -lf <host key file>; on Windows C:\\ProgramData\\ssh\\ssh_host_ed25519_key.pub). "+
			"If they differ, remove the entry (ssh-keygen -R %s -f %s): the connection may have been intercepted.",
			entry, p.knownHosts, gossh.FingerprintSHA256(key), shellQuote(entry), p.knownHosts),
	})
}

func unknownKeyMessage(addr string, key gossh.PublicKey, file string) string {
	host, port, _ := net.SplitHostPort(addr)
	scan := "ssh-keyscan " + host
	if port != "22" {
		scan = "ssh-keyscan -p " + port + " " + host
	}
	return fmt.Sprintf("ssh: the host key of %s is not known: the host presented %s. "+
		"wsu verifies host keys and does not trust an unknown one. To trust this host, do one of:\n"+
		"  - add its key to %s after checking the fingerprint on the host (ssh-keygen -lf <host key file>): %s >> %s\n"+
		"  - pin it in the inventory: ssh_host_key=%q\n"+
		"  - set ssh_trust_on_first_use=true to record the key on the first connection",
		addr, describeKey(key), file, scan, file, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key))))
}

// describeKey is "ssh-ed25519 SHA256:...", as OpenSSH shows a key.
func describeKey(k gossh.PublicKey) string {
	return k.Type() + " " + gossh.FingerprintSHA256(k)
}

func keysEqual(a, b gossh.PublicKey) bool {
	return a.Type() == b.Type() && string(a.Marshal()) == string(b.Marshal())
}

// probeKey is a key no host has: checking it lists the keys known for an
// address.
var probeKey = sync.OnceValue(func() gossh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(nil)
	k, _ := gossh.NewPublicKey(pub)
	return k
})

func knownKeys(db gossh.HostKeyCallback, addr string) []gossh.PublicKey {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	p, _ := strconv.Atoi(port)
	err = db(addr, &net.TCPAddr{IP: net.ParseIP(host), Port: p}, probeKey())
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return nil
	}
	var keys []gossh.PublicKey
	for _, k := range ke.Want {
		keys = append(keys, k.Key)
	}
	return keys
}

// preferredHostKeyAlgos is the order for hosts with no known key, as
// OpenSSH's client: ed25519 first (the shortest key to pin). SHA-1 ssh-rsa
// signatures are left out; every OpenSSH since 7.2 signs with SHA-2.
var preferredHostKeyAlgos = []string{
	gossh.KeyAlgoED25519,
	gossh.KeyAlgoECDSA256, gossh.KeyAlgoECDSA384, gossh.KeyAlgoECDSA521,
	gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256,
}

// algorithmsFor lists the host key algorithms that can verify keys; all
// of them, in preferredHostKeyAlgos order, when none are known.
func algorithmsFor(keys []gossh.PublicKey) []string {
	if len(keys) == 0 {
		return preferredHostKeyAlgos
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	for _, k := range keys {
		if k.Type() == gossh.KeyAlgoRSA {
			// One RSA key signs with either.
			add(gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256)
			continue
		}
		add(k.Type())
	}
	return algos
}

// shellQuote quotes s for a POSIX shell when it needs it ([host]:port).
func shellQuote(s string) string {
	if strings.ContainsAny(s, "[]*?$ ") {
		return "'" + s + "'"
	}
	return s
}
