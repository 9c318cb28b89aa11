package ssh

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// credentials are the auth methods for the target and for a jump host.
type credentials struct {
	target []gossh.AuthMethod
	// jump never gets the password: a bastion should not learn the
	// target's password.
	jump []gossh.AuthMethod
	// what names the methods for error messages.
	what  string
	close func()
	// key is the configured private key's public half; keyUsed is set when
	// the target asked for a signature with it, which a server does only
	// for a key it accepts.
	key     gossh.PublicKey
	keyUsed atomic.Bool
}

// newLoginSigner wraps s to record that the target asked for a signature.
// The wrapper keeps s's algorithm interfaces: x/crypto signs an RSA key
// with rsa-sha2-256/512 only through AlgorithmSigner, and falls back to
// ssh-rsa (SHA-1), which current sshd refuses, for a plain Signer.
func newLoginSigner(s gossh.Signer, used *atomic.Bool) gossh.Signer {
	as, ok := s.(gossh.AlgorithmSigner)
	if !ok {
		return plainLoginSigner{Signer: s, used: used}
	}
	ls := loginSigner{AlgorithmSigner: as, used: used}
	if ms, ok := s.(gossh.MultiAlgorithmSigner); ok {
		return multiLoginSigner{loginSigner: ls, algorithms: ms.Algorithms()}
	}
	return ls
}

// plainLoginSigner records a signature of a signer with one algorithm.
type plainLoginSigner struct {
	gossh.Signer
	used *atomic.Bool
}

func (s plainLoginSigner) Sign(rand io.Reader, data []byte) (*gossh.Signature, error) {
	s.used.Store(true)
	return s.Signer.Sign(rand, data)
}

// loginSigner records a signature of a signer that can pick its algorithm.
type loginSigner struct {
	gossh.AlgorithmSigner
	used *atomic.Bool
}

func (s loginSigner) Sign(rand io.Reader, data []byte) (*gossh.Signature, error) {
	s.used.Store(true)
	return s.AlgorithmSigner.Sign(rand, data)
}

func (s loginSigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*gossh.Signature, error) {
	s.used.Store(true)
	return s.AlgorithmSigner.SignWithAlgorithm(rand, data, algorithm)
}

// multiLoginSigner is a loginSigner restricted to some algorithms.
type multiLoginSigner struct {
	loginSigner
	algorithms []string
}

func (s multiLoginSigner) Algorithms() []string { return s.algorithms }

// loginKey is the key the last successful login signed with, nil when
// it used none (a password, the ssh-agent's or the default keys).
func (cr *credentials) loginKey() gossh.PublicKey {
	if cr.keyUsed.Load() {
		return cr.key
	}
	return nil
}

// loadCredentials prepares the configured key or password; without either
// it uses the ssh-agent (SSH_AUTH_SOCK), then ~/.ssh's default keys.
func loadCredentials(ctx context.Context, c Config) (*credentials, error) {
	pp := passphrasesFrom(ctx)
	cr := &credentials{close: func() {}}
	var signer gossh.Signer
	var err error
	switch {
	case c.PrivateKeyFile != "":
		if signer, err = pp.loadKey(c.PrivateKeyFile); err != nil {
			return nil, err
		}
		cr.what = "the private key " + c.PrivateKeyFile
	case c.PrivateKey != "":
		if signer, err = pp.keySigner([]byte(c.PrivateKey), "in ssh_private_key"); err != nil {
			return nil, err
		}
		cr.what = "the private key in ssh_private_key"
	}
	var keyAuth gossh.AuthMethod
	if signer != nil {
		keyAuth = gossh.PublicKeys(signer)
		cr.key = signer.PublicKey()
		cr.target = append(cr.target, gossh.PublicKeys(newLoginSigner(signer, &cr.keyUsed)))
		cr.jump = append(cr.jump, keyAuth)
	}
	if c.Password != "" {
		pw := c.Password
		cr.target = append(cr.target, gossh.Password(pw),
			// Windows OpenSSH and PAM servers may only offer this.
			gossh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = pw
				}
				return answers, nil
			}))
		if cr.what != "" {
			cr.what += " and "
		}
		cr.what += "the password"
	}
	if keyAuth != nil {
		return cr, nil
	}
	// Without a key the agent (or the default keys) serve the jump host,
	// and the target too when no password was given.
	fallback, what, err := agentOrDefaultKeys(pp, cr)
	if err != nil && c.Password == "" {
		return nil, err
	}
	cr.jump = fallback
	if c.Password == "" {
		if fallback == nil {
			return nil, errors.New("no SSH credentials: set ansible_ssh_private_key_file (or private_key_file, or the key itself in ssh_private_key) or ansible_password, or start an ssh-agent (SSH_AUTH_SOCK)")
		}
		cr.target, cr.what = fallback, what
	}
	return cr, nil
}

func agentOrDefaultKeys(pp *Passphrases, cr *credentials) ([]gossh.AuthMethod, string, error) {
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, "", fmt.Errorf("no private key file or password is set and the ssh-agent at SSH_AUTH_SOCK=%s cannot be reached: %w", sock, err)
		}
		ag := agent.NewClient(conn)
		cr.close = func() { conn.Close() }
		return []gossh.AuthMethod{gossh.PublicKeysCallback(ag.Signers)}, "the keys of the ssh-agent", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, "", nil
	}
	var signers []gossh.Signer
	var files []string
	for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		file := filepath.Join(home, ".ssh", name)
		if _, err := os.Stat(file); err != nil {
			continue
		}
		if s, err := pp.loadKey(file); err == nil {
			signers = append(signers, s)
			files = append(files, file)
		}
	}
	if len(signers) == 0 {
		return nil, "", nil
	}
	return []gossh.AuthMethod{gossh.PublicKeys(signers...)}, fmt.Sprintf("the default keys %v", files), nil
}

// loadKey reads an OpenSSH or PEM private key file.
func (pp *Passphrases) loadKey(file string) (gossh.Signer, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	return pp.keySigner(pem, file)
}

// keySigner parses a private key; what names it in errors (a file, or "in
// ssh_private_key"), which never quote the key itself. An encrypted key
// needs its passphrase: from WSU_SSH_PASSPHRASE, else typed at the prompt
// the CLI installs for its run when it runs on a terminal (WithPassphrases).
func (pp *Passphrases) keySigner(pem []byte, what string) (gossh.Signer, error) {
	pass, hasPass := os.LookupEnv(PassphraseEnv)
	var passphrase []byte
	if hasPass {
		passphrase = []byte(pass)
	}
	signer, err := parseKey(pem, passphrase)
	if isPassphraseMissing(err) {
		if typed, ok, perr := pp.prompted(pem, what); perr != nil {
			return nil, fmt.Errorf("the private key %s is encrypted, and reading its passphrase failed: %w", what, perr)
		} else if ok {
			signer, err = gossh.ParsePrivateKeyWithPassphrase(pem, typed)
			if errors.Is(err, x509.IncorrectPasswordError) {
				pp.forget(pem)
				return nil, fmt.Errorf("the private key %s: the passphrase typed is wrong", what)
			}
		}
	}
	switch {
	case err == nil:
		return signer, nil
	case isPassphraseMissing(err):
		return nil, fmt.Errorf("the private key %s is encrypted: put its passphrase in the environment variable %s, or run wsu on a terminal to be asked for it", what, PassphraseEnv)
	case errors.Is(err, x509.IncorrectPasswordError):
		return nil, fmt.Errorf("the private key %s: the passphrase in %s is wrong", what, PassphraseEnv)
	default:
		return nil, fmt.Errorf("the private key %s: %w (OpenSSH and PEM private keys are supported)", what, err)
	}
}

// PassphrasePrompt asks the user for the passphrase of the key named by
// what. The CLI installs one when stdin is a terminal; without one (a Job,
// a controller, piped input) an encrypted key needs WSU_SSH_PASSPHRASE.
type PassphrasePrompt func(what string) ([]byte, error)

// Passphrases are one run's typed passphrases: each key is asked for once,
// however many hosts connect with it at once. It belongs to the run that
// made it (NewPassphrases, WithPassphrases), so concurrent runs in one
// process (a controller) never share a prompt or a typed passphrase. A nil
// *Passphrases asks nobody.
type Passphrases struct {
	prompt PassphrasePrompt
	mu     sync.Mutex
	typed  map[[32]byte][]byte // by key content
}

// NewPassphrases returns a run's passphrase store asking through prompt.
func NewPassphrases(prompt PassphrasePrompt) *Passphrases {
	return &Passphrases{prompt: prompt, typed: map[[32]byte][]byte{}}
}

type passphrasesKey struct{}

// WithPassphrases makes the connections dialled under ctx ask pp for
// encrypted keys' passphrases. The setup package puts the run's into the
// context its connector dials with.
func WithPassphrases(ctx context.Context, pp *Passphrases) context.Context {
	return context.WithValue(ctx, passphrasesKey{}, pp)
}

func passphrasesFrom(ctx context.Context) *Passphrases {
	pp, _ := ctx.Value(passphrasesKey{}).(*Passphrases)
	return pp
}

// prompted returns the passphrase typed for pem, asking once: hosts
// connecting in parallel with the same key wait for the one prompt.
func (pp *Passphrases) prompted(pem []byte, what string) ([]byte, bool, error) {
	if pp == nil || pp.prompt == nil {
		return nil, false, nil
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	sum := sha256.Sum256(pem)
	if p, ok := pp.typed[sum]; ok {
		return p, true, nil
	}
	p, err := pp.prompt(what)
	if err != nil {
		return nil, false, err
	}
	pp.typed[sum] = p
	return p, true, nil
}

// forget drops a wrong passphrase, so the next connection asks again.
func (pp *Passphrases) forget(pem []byte) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	delete(pp.typed, sha256.Sum256(pem))
}

// parseKey parses an unencrypted key, or an encrypted one when passphrase
// is not nil.
func parseKey(pem, passphrase []byte) (gossh.Signer, error) {
	signer, err := gossh.ParsePrivateKey(pem)
	if isPassphraseMissing(err) && passphrase != nil {
		return gossh.ParsePrivateKeyWithPassphrase(pem, passphrase)
	}
	return signer, err
}

func isPassphraseMissing(err error) bool {
	var missing *gossh.PassphraseMissingError
	return errors.As(err, &missing)
}
