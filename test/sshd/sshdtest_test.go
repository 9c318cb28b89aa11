//go:build linux

package sshdtest

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestServer(t *testing.T) {
	s := Start(t)
	dir := t.TempDir()
	key := NewKey(t, dir, KeyOptions{})
	s.Authorize(t, key.Public)
	signer := loadSigner(t, key.File)
	pwUser, pw := PasswordUser(t)

	tests := []struct {
		name string
		user string
		auth ssh.AuthMethod
	}{
		{"key", s.User, ssh.PublicKeys(signer)},
		{"password", pwUser, ssh.Password(pw)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, s, tt.user, tt.auth, "id -un")
			if got := strings.TrimSpace(out); got != tt.user {
				t.Fatalf("logged in as %q, want %q", got, tt.user)
			}
		})
	}

	t.Run("restart", func(t *testing.T) {
		s.Stop()
		if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
			c.Close()
			t.Fatal("sshd still listens after Stop")
		}
		s.Restart(t)
		run(t, s, s.User, ssh.PublicKeys(signer), "true")
	})
}

func loadSigner(t *testing.T, file string) ssh.Signer {
	t.Helper()
	b := readFile(t, file)
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, s *Server, user string, auth ssh.AuthMethod, cmd string) string {
	t.Helper()
	c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{
		User:              user,
		Auth:              []ssh.AuthMethod{auth},
		HostKeyCallback:   ssh.FixedHostKey(s.HostKeys[0]),
		HostKeyAlgorithms: []string{s.HostKeys[0].Type()},
		Timeout:           10 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var out bytes.Buffer
	sess.Stdout = &out
	if err := sess.Run(cmd); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out.String()
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNoSFTP(t *testing.T) {
	for _, noSFTP := range []bool{false, true} {
		s := StartWith(t, Options{NoSFTP: noSFTP})
		key := NewKey(t, t.TempDir(), KeyOptions{})
		s.Authorize(t, key.Public)
		c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{
			User:              s.User,
			Auth:              []ssh.AuthMethod{ssh.PublicKeys(loadSigner(t, key.File))},
			HostKeyCallback:   ssh.FixedHostKey(s.HostKeys[0]),
			HostKeyAlgorithms: []string{s.HostKeys[0].Type()},
			Timeout:           10 * time.Second,
		})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		err = sess.RequestSubsystem("sftp")
		sess.Close()
		c.Close()
		if noSFTP && err == nil {
			t.Error("NoSFTP: the sftp subsystem was granted")
		}
		if !noSFTP && err != nil {
			t.Errorf("the sftp subsystem was refused: %v", err)
		}
	}
}
