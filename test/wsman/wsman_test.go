package wsmantest

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-ntlmssp"
	mzwinrm "github.com/masterzen/winrm"
)

func TestMD4(t *testing.T) {
	// RFC 1320 A.5.
	for in, want := range map[string]string{
		"":               "31d6cfe0d16ae931b73c59d7e0c089c0",
		"a":              "bde52cb31de33e46245e05fbdbd6fb24",
		"abc":            "a448017aaf21d8525fc10ae87aa6729d",
		"message digest": "d9130a8164549fe818874806e1c7014b",
		"12345678901234567890123456789012345678901234567890123456789012345678901234567890": "e33b4ddc9c38f2199c3e7b164fcc0536",
	} {
		if got := md4([]byte(in)); hex.EncodeToString(got[:]) != want {
			t.Errorf("md4(%q) = %x, want %s", in, got, want)
		}
	}
}

func TestNTOWFv2(t *testing.T) {
	// MS-NLMP 4.2.4.1.1.
	if got := hex.EncodeToString(ntowfv2("Password", "User", "Domain")); got != "0c868a403bfd7a93a3001ef22ef02e3f" {
		t.Fatalf("NTOWFv2 = %s", got)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT60S": time.Minute, "PT20.000S": 20 * time.Second, "PT0.5S": 500 * time.Millisecond,
		"PT1M30S": 90 * time.Second, "P1DT1H": 25 * time.Hour,
	} {
		if got, ok := parseDuration(in); !ok || got != want {
			t.Errorf("parseDuration(%q) = %v, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "P", "PT", "60", "PT-1S"} {
		if _, ok := parseDuration(in); ok {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
}

func TestLiftLongText(t *testing.T) {
	long := strings.Repeat("QUJD", 600)
	body := []byte(`<a><b x="1">` + long + `</b><c>short</c><d><![CDATA[` + long + `]]></d><e>` + long + "&amp;" + `</e></a>`)
	small, lifted := liftLongText(body)
	if len(lifted) != 1 || string(lifted[0]) != long {
		t.Fatalf("lifted %d texts", len(lifted))
	}
	if !bytes.Contains(small, []byte(`<b x="1">@0@</b>`)) || bytes.Count(small, []byte(long)) != 2 {
		t.Fatalf("small = %s", small)
	}
	if string(unlift("@0@", lifted)) != long || string(unlift("abc", lifted)) != "abc" {
		t.Fatal("unlift")
	}
}

// echo copies stdin to stdout and says how many bytes on stderr.
func echo(_ context.Context, c *Cmd) int {
	n, _ := io.Copy(c.Stdout, c.Stdin)
	io.WriteString(c.Stderr, strings.Repeat("x", int(n%7)))
	return int(n % 256)
}

func client(t *testing.T, s *Server, password string, ntlm bool, params *mzwinrm.Parameters) *mzwinrm.Client {
	t.Helper()
	ep := &mzwinrm.Endpoint{Host: s.Host, Port: s.Port, HTTPS: s.CA != nil, Timeout: 10 * time.Second}
	if s.CA != nil {
		ep.CACert = s.CA.PEM
	}
	if params == nil {
		params = mzwinrm.NewParameters("PT5S", "en-US", 153600)
	}
	if ntlm {
		params.TransportDecorator = func() mzwinrm.Transporter { return &mzwinrm.ClientNTLM{} }
	}
	c, err := mzwinrm.NewClientWithParameters(ep, s.User, password, params)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// masterzen/winrm's own Command API against the endpoint.
func TestMasterzenRunWithInput(t *testing.T) {
	s, err := Start(Options{Handler: echo})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, ntlm := range []bool{false, true} {
		c := client(t, s, s.Password, ntlm, nil)
		in := strings.Repeat("stdin bytes ", 1000)
		var stdout, stderr bytes.Buffer
		code, err := c.RunWithInput("echo", &stdout, &stderr, strings.NewReader(in))
		if err != nil || stdout.String() != in || stderr.String() != strings.Repeat("x", len(in)%7) || code != len(in)%256 {
			t.Fatalf("ntlm %v: stdout %d bytes, stderr %q, code %d, err %v", ntlm, stdout.Len(), stderr.String(), code, err)
		}
	}
	st := s.Stats()
	if st.Shells != 2 || len(st.Commands) != 2 || st.Commands[0] != "echo" || st.AuthFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ntlm bool
		pass string
		ok   bool
	}{
		{"basic", Options{}, false, "", true},
		{"ntlm", Options{}, true, "", true},
		{"basic, wrong password", Options{}, false, "nope", false},
		{"ntlm, wrong password", Options{}, true, "nope", false},
		{"basic disabled", Options{DisableBasic: true}, false, "", false},
		{"ntlm falls back to basic", Options{DisableNTLM: true}, true, "", true},
		{"ntlm over http", Options{HTTP: true}, true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Handler = echo
			s, err := Start(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pass := tc.pass
			if pass == "" {
				pass = s.Password
			}
			_, err = client(t, s, pass, tc.ntlm, nil).CreateShell()
			if tc.ok != (err == nil) {
				t.Fatalf("CreateShell: %v", err)
			}
			if !tc.ok && !strings.Contains(err.Error(), "401") {
				t.Fatalf("err = %v, want a 401", err)
			}
		})
	}
}

// post sends a raw envelope and returns the status and body.
func post(t *testing.T, s *Server, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/soap+xml;charset=UTF-8")
	req.SetBasicAuth(s.User, s.Password)
	resp, err := (&http.Client{Transport: ntlmssp.Negotiator{RoundTripper: &http.Transport{}}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFaults(t *testing.T) {
	s, err := Start(Options{HTTP: true, MaxEnvelopeSize: 16384, Handler: func(ctx context.Context, c *Cmd) int {
		<-ctx.Done() // never says anything
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := s.URL
	p := mzwinrm.NewParameters("PT0.3S", "en-US", 16384)

	shellReq := mzwinrm.NewOpenShellRequest(url, p).String()
	code, body := post(t, s, shellReq)
	if code != 200 {
		t.Fatalf("Create: %d %s", code, body)
	}
	shellID, _ := mzwinrm.ParseOpenShellResponse(body)
	code, body = post(t, s, mzwinrm.NewExecuteCommandRequest(url, shellID, "quiet", nil, p).String())
	cmdID, _ := mzwinrm.ParseExecuteCommandResponse(body)
	if code != 200 || cmdID == "" {
		t.Fatalf("Command: %d %s", code, body)
	}

	// Nothing within the OperationTimeout: w:TimedOut.
	code, body = post(t, s, mzwinrm.NewGetOutputRequest(url, shellID, cmdID, "stdout stderr", p).String())
	if code != 500 || !strings.Contains(body, "w:TimedOut") || !strings.Contains(body, "2150858793") {
		t.Fatalf("Receive: %d %s", code, body)
	}

	// An envelope over the endpoint's limit: w:EncodingLimit.
	code, body = post(t, s, mzwinrm.NewSendInputRequest(url, shellID, cmdID, make([]byte, 20000), false, p).String())
	if code != 500 || !strings.Contains(body, "w:EncodingLimit") || !strings.Contains(body, "faultDetail/ServiceEnvelopeLimit") {
		t.Fatalf("oversized Send: %d %s", code, body)
	}
	// A MaxEnvelopeSize below 8192: w:EncodingLimit.
	code, body = post(t, s, mzwinrm.NewOpenShellRequest(url, mzwinrm.NewParameters("PT1S", "en-US", 4096)).String())
	if code != 500 || !strings.Contains(body, "MinimumEnvelopeLimit") {
		t.Fatalf("tiny MaxEnvelopeSize: %d %s", code, body)
	}
	// An unknown shell: w:InvalidSelectors.
	code, body = post(t, s, mzwinrm.NewDeleteShellRequest(url, "NOT-A-SHELL", p).String())
	if code != 500 || !strings.Contains(body, "w:InvalidSelectors") {
		t.Fatalf("unknown shell: %d %s", code, body)
	}

	// Signal terminate ends the command; Receive then reports Done.
	code, body = post(t, s, mzwinrm.NewSignalRequest(url, shellID, cmdID, p).String())
	if code != 200 {
		t.Fatalf("Signal: %d %s", code, body)
	}
	code, body = post(t, s, mzwinrm.NewGetOutputRequest(url, shellID, cmdID, "stdout stderr", p).String())
	if done, _, _ := mzwinrm.ParseSlurpOutputErrResponse(body, io.Discard, io.Discard); code != 200 || !done {
		t.Fatalf("Receive after terminate: %d %s", code, body)
	}
	if code, body = post(t, s, mzwinrm.NewDeleteShellRequest(url, shellID, p).String()); code != 200 {
		t.Fatalf("Delete: %d %s", code, body)
	}
	st := s.Stats()
	if st.TimedOut != 1 || st.Oversized != 1 || len(st.Signals) != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestReceiveFitsClientEnvelope(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 100000) // 1 MB of output
	s, err := Start(Options{HTTP: true, Handler: func(_ context.Context, c *Cmd) int {
		c.Stdout.Write(big)
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := mzwinrm.NewParameters("PT5S", "en-US", 65536)
	_, body := post(t, s, mzwinrm.NewOpenShellRequest(s.URL, p).String())
	shellID, _ := mzwinrm.ParseOpenShellResponse(body)
	_, body = post(t, s, mzwinrm.NewExecuteCommandRequest(s.URL, shellID, "big", nil, p).String())
	cmdID, _ := mzwinrm.ParseExecuteCommandResponse(body)
	var out bytes.Buffer
	for n := 0; ; n++ {
		code, body := post(t, s, mzwinrm.NewGetOutputRequest(s.URL, shellID, cmdID, "stdout stderr", p).String())
		if code != 200 || len(body) > 65536 {
			t.Fatalf("Receive %d: status %d, %d bytes", n, code, len(body))
		}
		done, _, _ := mzwinrm.ParseSlurpOutputErrResponse(body, &out, io.Discard)
		if done {
			break
		}
	}
	if !bytes.Equal(out.Bytes(), big) {
		t.Fatalf("received %d bytes, want %d", out.Len(), len(big))
	}
}
