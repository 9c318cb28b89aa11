package winrm

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/notify"
	"github.com/wsu-project/wsu/test/standin/metadata"
	wsmantest "github.com/wsu-project/wsu/test/wsman"
	"github.com/wsu-project/wsu/transport/agentbin"
)

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// exercise runs host operations through the agent on the simulated host.
func exercise(t *testing.T, f *fixture, h host.Host) {
	t.Helper()
	ctx := context.Background()
	facts, err := h.Facts(ctx)
	if err != nil {
		t.Fatalf("Facts: %v", err)
	}
	if facts.OS != "windows" {
		t.Errorf("Facts.OS = %q, want windows", facts.OS)
	}
	if err := h.MkdirAll(ctx, `C:\k\data`, 0o755); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	content := make([]byte, 3<<20+17) // several frames and Send messages
	rand.Read(content)
	if err := h.WriteFile(ctx, `C:\k\data\blob.bin`, bytes.NewReader(content), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := os.ReadFile(f.local(t, `C:\k\data\blob.bin`))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the simulated file does not hold what was written (err %v, %d bytes)", err, len(got))
	}
	back, err := h.ReadFile(ctx, `C:\k\data\blob.bin`, 0)
	if err != nil || !bytes.Equal(back, content) {
		t.Fatalf("ReadFile: err %v, %d bytes, equal %v", err, len(back), bytes.Equal(back, content))
	}
	sum, err := h.SHA256(ctx, `C:\k\data\blob.bin`)
	want := sha256.Sum256(content)
	if err != nil || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("SHA256 = %q, %v", sum, err)
	}
	fi, err := h.Stat(ctx, `C:\k\data\blob.bin`)
	if err != nil || !fi.Exists || fi.Size != int64(len(content)) {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	if err := h.EnvSet(ctx, "WSU_WINRM_TEST", "yes"); err != nil {
		t.Fatalf("EnvSet: %v", err)
	}
	if v, ok, err := h.EnvGet(ctx, "WSU_WINRM_TEST"); err != nil || !ok || v != "yes" {
		t.Fatalf("EnvGet = %q, %v, %v", v, ok, err)
	}
	// net.http reaches the agent through the WinRM host (the stand-in
	// metadata service on 127.0.0.1, which the simulated host shares).
	md := metadata.Start(metadata.Options{GCPHostname: "win-a.c.proj.internal"})
	defer md.Close()
	resp, err := h.DoHTTP(ctx, host.HTTPRequest{URL: md.URL + "/computeMetadata/v1/instance/hostname", Header: map[string]string{"Metadata-Flavor": "Google"}})
	if err != nil || resp.Status != 200 || string(resp.Body) != "win-a.c.proj.internal" {
		t.Fatalf("DoHTTP = %d %q, %v", resp.Status, resp.Body, err)
	}
}

func TestBasicOverHTTPS(t *testing.T) {
	f := newFixture(t, wsmantest.Options{DisableNTLM: true})
	h := f.dial(t, map[string]string{"ansible_winrm_transport": "basic"})
	exercise(t, f, h)
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestNTLMOverHTTPS(t *testing.T) {
	f := newFixture(t, wsmantest.Options{DisableBasic: true})
	h := f.dial(t, map[string]string{"ansible_winrm_transport": "ntlm"})
	exercise(t, f, h)
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if st := f.srv.Stats(); st.AuthFailures != 0 {
		t.Errorf("AuthFailures = %d", st.AuthFailures)
	}
}

// TestPlainHTTP: plain HTTP only when asked for by scheme and by
// ansible_winrm_message_encryption=never, and then with a warning; the
// HTTP port alone does not choose it.
func TestPlainHTTP(t *testing.T) {
	f := newFixture(t, wsmantest.Options{HTTP: true})
	var warnings []notify.Notice
	ctx := notify.With(context.Background(), func(n notify.Notice) { warnings = append(warnings, n) })
	hh, err := Dial(ctx, "win01", f.vars(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	h := hh.(*Host)
	defer h.Close()
	if _, err := h.Stat(context.Background(), `C:\`); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0].Kind != notify.Warning || !strings.Contains(warnings[0].Summary, "unencrypted") {
		t.Errorf("want one warning about plain text, got %+v", warnings)
	}

	t.Run("the port alone means https", func(t *testing.T) {
		before := f.srv.Stats().Shells
		_, err := f.tryDial(t, map[string]string{"ansible_winrm_scheme": "", "ansible_winrm_message_encryption": ""})
		if err == nil || !strings.Contains(err.Error(), "speaks plain HTTP") || !strings.Contains(err.Error(), "ansible_winrm_scheme=http") {
			t.Fatalf("err = %v, want the HTTPS client's refusal with the fix", err)
		}
		if f.srv.Stats().Shells != before {
			t.Error("a shell was created over plain HTTP")
		}
	})
	for _, auth := range []string{"basic", "ntlm"} {
		t.Run("http without message_encryption=never is refused: "+auth, func(t *testing.T) {
			before := f.srv.Stats()
			_, err := f.tryDial(t, map[string]string{"ansible_winrm_message_encryption": "", "ansible_winrm_transport": auth})
			if err == nil || !strings.Contains(err.Error(), "ansible_winrm_message_encryption=never") {
				t.Fatalf("err = %v", err)
			}
			if after := f.srv.Stats(); after.Requests != before.Requests || after.AuthFailures != before.AuthFailures {
				t.Errorf("the endpoint was contacted: %+v -> %+v", before, after)
			}
		})
	}
}

func TestWrongPasswordRefused(t *testing.T) {
	f := newFixture(t, wsmantest.Options{})
	for _, auth := range []string{"ntlm", "basic"} {
		t.Run(auth, func(t *testing.T) {
			before := f.srv.Stats().AuthFailures
			_, err := f.tryDial(t, map[string]string{"ansible_winrm_transport": auth, "ansible_password": "not-the-password"})
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("err = %v, want ErrUnauthorized", err)
			}
			if f.srv.Stats().AuthFailures == before {
				t.Error("the endpoint saw no failed authentication")
			}
			if st := f.srv.Stats(); st.Shells != 0 {
				t.Errorf("a shell was created: %+v", st)
			}
		})
	}
	t.Run("unknown user", func(t *testing.T) {
		_, err := f.tryDial(t, map[string]string{"ansible_user": "mallory"})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v, want ErrUnauthorized", err)
		}
	})
}

func TestServerCertificatePolicy(t *testing.T) {
	f := newFixture(t, wsmantest.Options{})
	other, err := wsmantest.NewCA("some other CA")
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(otherFile, other.PEM, 0o644)

	for _, tc := range []struct {
		name  string
		extra map[string]string
		ok    bool
	}{
		{"system roots", map[string]string{"winrm_ca_file": ""}, false},
		{"another CA", map[string]string{"winrm_ca_file": otherFile}, false},
		{"another CA, basic", map[string]string{"winrm_ca_file": otherFile, "ansible_winrm_transport": "basic"}, false},
		{"explicit validate", map[string]string{"winrm_ca_file": "", "ansible_winrm_server_cert_validation": "validate"}, false},
		{"the endpoint's CA", nil, true},
		{"Ansible's CA variable", map[string]string{"winrm_ca_file": "", "ansible_winrm_ca_trust_path": f.caFile}, true},
		{"explicit ignore", map[string]string{"winrm_ca_file": "", "ansible_winrm_server_cert_validation": "ignore"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := f.tryDial(t, tc.extra)
			if tc.ok {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				h.Close()
				return
			}
			if err == nil {
				h.Close()
				t.Fatal("connected to a server whose certificate is not trusted")
			}
			if !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("err = %v, want a certificate error", err)
			}
		})
	}
}

func TestAgentDeployment(t *testing.T) {
	f := newFixture(t, wsmantest.Options{})
	want := sha256File(t, agentBinary(t))
	path := `C:\k\wsu\wsu-test.exe`
	extra := map[string]string{"wsu_agent_path": path, "wsu_agent_args": "--sim-hostname winrm-node"}

	// First contact: nothing there, so the agent is uploaded and its hello
	// confirms the sha256.
	h := f.dial(t, extra)
	d := h.Deployment()
	if !d.Uploaded || !strings.Contains(d.Reason, "did not start") {
		t.Fatalf("deployment = %+v, want an upload because the agent was missing", d)
	}
	if h.Hello().AgentSHA256 != want || sha256File(t, f.local(t, path)) != want {
		t.Fatal("the agent on the host is not the binary uploaded")
	}
	if d.Sends < 2 || d.Bytes != fileSize(t, agentBinary(t)) {
		t.Errorf("deployment = %+v: want the whole binary in several Send messages", d)
	}
	t.Logf("%s", d)
	if c := h.Counters(); c.AgentBytes != d.Bytes || c.RPCs != 0 || c.BytesSent != 0 {
		t.Errorf("counters after the deployment = %+v, want AgentBytes %d and nothing else", c, d.Bytes)
	}
	exercise(t, f, h)
	// exercise's Facts came with the hello, and its one file is payload.
	wantOps := map[string]int64{"fs.mkdir": 1, "fs.write": 1, "fs.read": 1, "fs.sha256": 1, "fs.stat": 1, "env.set": 1, "env.get": 1, "net.http": 1}
	if c := h.Counters(); c.RPCs != 8 || !reflect.DeepEqual(c.RPCsByOp, wantOps) || c.BytesSent != 3<<20+17 || c.AgentBytes != d.Bytes {
		t.Errorf("counters after exercise = %+v, want 8 RPCs %v, %d bytes sent", c, wantOps, 3<<20+17)
	}
	facts, _ := h.Facts(context.Background())
	if facts.Hostname != "winrm-node" {
		t.Errorf("hostname = %q: wsu_agent_args did not reach the agent", facts.Hostname)
	}
	h.Close()

	// Second contact: the agent is current, nothing is uploaded.
	h2 := f.dial(t, extra)
	if d := h2.Deployment(); d.Uploaded {
		t.Fatalf("re-uploaded a current agent: %+v", d)
	}
	if c := h2.Counters(); c.AgentBytes != 0 {
		t.Errorf("AgentBytes = %d for a current agent, want 0", c.AgentBytes)
	}
	if _, err := h2.Stat(context.Background(), `C:\k\data\blob.bin`); err != nil {
		t.Fatal(err)
	}
	h2.Close()
	if n := f.sim.Uploads.Load(); n != 1 {
		t.Errorf("uploads = %d, want 1", n)
	}

	// A different binary at the path (another build of the same version):
	// the hello's sha256 differs, so the agent is redeployed.
	stale, _ := os.ReadFile(agentBinary(t))
	stale = append(stale, "another build"...)
	if err := os.WriteFile(f.local(t, path), stale, 0o755); err != nil {
		t.Fatal(err)
	}
	h3 := f.dial(t, extra)
	if d := h3.Deployment(); !d.Uploaded || !strings.Contains(d.Reason, "sha256") {
		t.Fatalf("deployment = %+v, want a redeploy for the sha256", d)
	}
	if sha256File(t, f.local(t, path)) != want || h3.Hello().AgentSHA256 != want {
		t.Fatal("the stale agent was not replaced")
	}
	if n := f.sim.Uploads.Load(); n != 2 {
		t.Errorf("uploads = %d, want 2", n)
	}
	h3.Close()
	if left, _ := filepath.Glob(f.local(t, `C:\k\wsu`) + "/*.tmp"); len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestBigStdinInEnvelopeSizedSends(t *testing.T) {
	content := make([]byte, 24<<20+5)
	rand.Read(content)
	local := filepath.Join(t.TempDir(), "big.bin")
	os.WriteFile(local, content, 0o644)

	for _, limit := range []int{512000, 153600} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			// The client starts at 500 KB; an endpoint configured lower
			// (the 150 KB of Windows Server 2008 R2) refuses the first
			// message, and the client halves its envelopes.
			f := newFixture(t, wsmantest.Options{MaxEnvelopeSize: limit})
			s := f.session(t, map[string]string{"ansible_winrm_transport": "basic"})
			st, err := s.upload(context.Background(), agentbin.File(local), `C:\k\big.bin`)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.local(t, `C:\k\big.bin`))
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("uploaded file differs (err %v, %d of %d bytes)", err, len(got), len(content))
			}
			ss := f.srv.Stats()
			textPerSend := float64(ss.StdinBytes) / float64(ss.Sends)
			t.Logf("%d Sends, largest envelope %d bytes, %.0f stdin bytes per Send, %d refused, %.1f MB/s",
				ss.Sends, ss.MaxEnvelope, textPerSend, ss.Oversized, float64(st.bytes)/1e6/st.duration.Seconds())
			if ss.MaxEnvelope > limit {
				t.Errorf("largest envelope %d > MaxEnvelopeSize %d", ss.MaxEnvelope, limit)
			}
			if ss.MaxEnvelope < limit/2 {
				t.Errorf("largest envelope %d: messages do not use the envelope (limit %d)", ss.MaxEnvelope, limit)
			}
			if ss.Sends < len(content)*4/3/limit {
				t.Errorf("%d Sends for %d bytes", ss.Sends, len(content))
			}
			if limit < DefaultMaxEnvelopeSize && ss.Oversized == 0 {
				t.Error("the endpoint never refused an envelope")
			}
		})
	}
}

func TestReceiveTimeoutsKeepData(t *testing.T) {
	opTimeout := map[string]string{"ansible_winrm_operation_timeout_sec": "0.5", "ansible_winrm_read_timeout_sec": "5"}

	t.Run("command", func(t *testing.T) {
		// Output that comes after several OperationTimeouts.
		f := newFixture(t, wsmantest.Options{Handler: func(ctx context.Context, c *wsmantest.Cmd) int {
			fmt.Fprint(c.Stdout, "first ")
			select {
			case <-time.After(1600 * time.Millisecond):
			case <-ctx.Done():
				return 1
			}
			fmt.Fprint(c.Stdout, "second")
			fmt.Fprint(c.Stderr, "done")
			return 7
		}})
		s := f.session(t, opTimeout)
		c, err := s.start("slow", "slow")
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(c.stdout)
		if err != nil {
			t.Fatal(err)
		}
		<-c.done
		if string(out) != "first second" || c.exitCode != 7 || c.stderr.String() != "done" {
			t.Fatalf("stdout %q, stderr %q, exit %d", out, c.stderr.String(), c.exitCode)
		}
		if s.timeouts.Load() < 2 || f.srv.Stats().TimedOut < 2 {
			t.Fatalf("timeouts: client %d, endpoint %d; want several", s.timeouts.Load(), f.srv.Stats().TimedOut)
		}
	})

	t.Run("agent", func(t *testing.T) {
		f := newFixture(t, wsmantest.Options{})
		h := f.dial(t, opTimeout)
		time.Sleep(1500 * time.Millisecond) // an idle agent: Receives time out
		exercise(t, f, h)
		if h.s.timeouts.Load() == 0 {
			t.Fatal("no Receive timed out")
		}
		if h.Lost() {
			t.Fatal("a timed-out Receive lost the connection")
		}
	})
}

func TestConnectionLost(t *testing.T) {
	for _, how := range []string{"cut", "stall"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, wsmantest.Options{})
			h := f.dial(t, map[string]string{"ansible_winrm_operation_timeout_sec": "1", "ansible_winrm_read_timeout_sec": "2"})
			ctx := context.Background()
			if _, err := h.Stat(ctx, `C:\`); err != nil {
				t.Fatal(err)
			}
			if h.Lost() {
				t.Fatal("Lost before anything happened")
			}
			if how == "stall" { // the host vanishes: nothing answers any more
				f.srv.Stall(true)
			}
			deadline := time.Now().Add(15 * time.Second)
			for !h.Lost() && time.Now().Before(deadline) {
				if how == "cut" {
					// A network change on the host drops every TCP connection.
					// Only a cut that hits a request in flight loses the
					// session; one between two Receives is survived (the
					// shell lives on), so keep cutting as a flapping network does.
					f.srv.CloseClientConnections()
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !h.Lost() {
				t.Fatal("Lost() stayed false")
			}
			_, err := h.Stat(ctx, `C:\`)
			if !errors.Is(err, host.ErrConnectionLost) {
				t.Fatalf("Stat after the loss: %v, want ErrConnectionLost", err)
			}
			start := time.Now()
			h.Close()
			if d := time.Since(start); d > time.Second {
				t.Errorf("Close on a lost connection took %s", d)
			}
			f.srv.Stall(false)
		})
	}
}

func TestCommands(t *testing.T) {
	f := newFixture(t, wsmantest.Options{})
	s := f.session(t, nil)

	c, err := s.start("dir", `dir C:\`)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c.stdout)
	<-c.done
	if c.exitCode != 1 || !strings.Contains(c.stderr.String(), "unknown command") {
		t.Fatalf("unknown command: %s", c.describe())
	}

	// A missing agent fails as cmd.exe does.
	c, err = s.start("agent", `C:\k\wsu\absent.exe agent`)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c.stdout)
	<-c.done
	if c.exitCode != 9009 || !strings.Contains(c.stderr.String(), "is not recognized") {
		t.Fatalf("missing agent: %s", c.describe())
	}

	// Signal terminate stops a running command.
	if _, err := s.upload(context.Background(), agentbin.File(agentBinary(t)), `C:\k\wsu\a.exe`); err != nil {
		t.Fatal(err)
	}
	c, err = s.start("agent", `C:\k\wsu\a.exe agent`)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, c.stdout)
	if err := c.terminate(); err != nil {
		t.Fatal(err)
	}
	if !c.wait(10 * time.Second) {
		t.Fatal("the command did not end after signal terminate")
	}
	if sig := f.srv.Stats().Signals; len(sig) != 1 || !strings.HasSuffix(sig[0], "/terminate") {
		t.Fatalf("signals = %v", sig)
	}
}

func TestMissingAgentBinary(t *testing.T) {
	f := newFixture(t, wsmantest.Options{})
	_, err := f.tryDial(t, map[string]string{"wsu_agent_binary": filepath.Join(t.TempDir(), "nope.exe")})
	if err == nil || !strings.Contains(err.Error(), "wsu_agent_binary") {
		t.Fatalf("err = %v", err)
	}
}

func TestUploadFailureReported(t *testing.T) {
	f := newFixture(t, wsmantest.Options{})
	s := f.session(t, nil)
	// C:\k\file.bin\x.exe: a directory where a file is.
	os.MkdirAll(filepath.Dir(f.local(t, `C:\k\x`)), 0o755)
	os.WriteFile(f.local(t, `C:\k\file.bin`), []byte("x"), 0o644)
	_, err := s.upload(context.Background(), agentbin.File(agentBinary(t)), `C:\k\file.bin\x.exe`)
	if err == nil || !strings.Contains(err.Error(), "upload") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}
