package winrm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/agentbin"
)

func TestConfigDefaults(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "wsu.exe")
	os.WriteFile(bin, []byte("x"), 0o644)
	cfg, err := ConfigFromVars("win01", strVars(map[string]string{"wsu_agent_binary": bin}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Name: "win01", Host: "win01", Port: 5986, HTTPS: true, Auth: "ntlm",
		ReadTimeout: 30 * time.Second, OperationTimeout: 20 * time.Second,
		MaxEnvelopeSize: 512000, AgentPath: DefaultAgentPath(), AgentBinary: bin,
	}
	if cfg.Insecure || cfg.CAPEM != nil || cfg.User != "" || len(cfg.AgentArgs) != 0 {
		t.Errorf("unexpected settings: %+v", cfg)
	}
	cfg.CAPEM, cfg.AgentArgs = nil, nil
	if cfg.Name != want.Name || cfg.Host != want.Host || cfg.Port != want.Port || cfg.HTTPS != want.HTTPS ||
		cfg.Auth != want.Auth || cfg.ReadTimeout != want.ReadTimeout || cfg.OperationTimeout != want.OperationTimeout ||
		cfg.MaxEnvelopeSize != want.MaxEnvelopeSize || cfg.AgentPath != want.AgentPath || cfg.AgentBinary != want.AgentBinary {
		t.Errorf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
	if !safePath.MatchString(DefaultAgentPath()) || !strings.HasPrefix(DefaultAgentPath(), `C:\k\wsu\wsu-`) {
		t.Errorf("DefaultAgentPath() = %q", DefaultAgentPath())
	}
}

func TestConfigFromVars(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	os.WriteFile(notPEM, []byte("hello"), 0o644)

	for _, tc := range []struct {
		name  string
		vars  map[string]string
		check func(t *testing.T, c Config)
		err   string
	}{
		{name: "ansible_host, user, password",
			vars: map[string]string{"ansible_host": "10.0.0.5", "ansible_user": `CORP\admin`, "ansible_password": "pw"},
			check: func(t *testing.T, c Config) {
				if c.Host != "10.0.0.5" || c.User != `CORP\admin` || c.Password != "pw" {
					t.Errorf("%+v", c)
				}
			}},
		{name: "port 5985 alone is still https (unlike Ansible)",
			vars: map[string]string{"ansible_port": "5985"},
			check: func(t *testing.T, c Config) {
				if !c.HTTPS || c.Port != 5985 || len(c.Warnings) != 0 {
					t.Errorf("%+v", c)
				}
			}},
		{name: "port 5985 with Basic is still https",
			vars: map[string]string{"ansible_port": "5985", "ansible_winrm_transport": "basic"},
			check: func(t *testing.T, c Config) {
				if !c.HTTPS || c.Auth != "basic" {
					t.Errorf("%+v", c)
				}
			}},
		{name: "scheme http with message encryption never, default port",
			vars: map[string]string{"ansible_winrm_scheme": "http", "ansible_winrm_message_encryption": "never"},
			check: func(t *testing.T, c Config) {
				if c.HTTPS || c.Port != 5985 {
					t.Errorf("%+v", c)
				}
				if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "unencrypted") {
					t.Errorf("want a warning about plain text: %q", c.Warnings)
				}
			}},
		{name: "basic over http with message encryption never",
			vars: map[string]string{"ansible_winrm_scheme": "HTTP", "ansible_winrm_message_encryption": "Never", "ansible_winrm_transport": "basic", "ansible_port": "5985"},
			check: func(t *testing.T, c Config) {
				if c.HTTPS || c.Auth != "basic" || len(c.Warnings) != 1 {
					t.Errorf("%+v", c)
				}
			}},
		{name: "message encryption auto over https",
			vars: map[string]string{"ansible_winrm_message_encryption": "auto"},
			check: func(t *testing.T, c Config) {
				if !c.HTTPS || len(c.Warnings) != 0 {
					t.Errorf("%+v", c)
				}
			}},
		{name: "message encryption never over https changes nothing",
			vars: map[string]string{"ansible_winrm_message_encryption": "never"},
			check: func(t *testing.T, c Config) {
				if !c.HTTPS || len(c.Warnings) != 0 {
					t.Errorf("%+v", c)
				}
			}},
		{name: "scheme https on a custom port",
			vars: map[string]string{"ansible_winrm_scheme": "HTTPS", "ansible_port": "15986"},
			check: func(t *testing.T, c Config) {
				if !c.HTTPS || c.Port != 15986 {
					t.Errorf("%+v", c)
				}
			}},
		{name: "basic", vars: map[string]string{"ansible_winrm_transport": "Basic"},
			check: func(t *testing.T, c Config) {
				if c.Auth != "basic" {
					t.Errorf("%+v", c)
				}
			}},
		{name: "ignore only when explicit", vars: map[string]string{"ansible_winrm_server_cert_validation": "ignore"},
			check: func(t *testing.T, c Config) {
				if !c.Insecure {
					t.Errorf("%+v", c)
				}
			}},
		{name: "validate", vars: map[string]string{"ansible_winrm_server_cert_validation": "validate"},
			check: func(t *testing.T, c Config) {
				if c.Insecure {
					t.Errorf("%+v", c)
				}
			}},
		{name: "CA file", vars: map[string]string{"winrm_ca_file": ca},
			check: func(t *testing.T, c Config) {
				if !strings.Contains(string(c.CAPEM), "BEGIN CERTIFICATE") {
					t.Errorf("%+v", c)
				}
			}},
		{name: "timeouts", vars: map[string]string{"ansible_winrm_read_timeout_sec": "90", "ansible_winrm_operation_timeout_sec": "60"},
			check: func(t *testing.T, c Config) {
				if c.ReadTimeout != 90*time.Second || c.OperationTimeout != time.Minute {
					t.Errorf("%+v", c)
				}
			}},
		{name: "agent path and args", vars: map[string]string{"wsu_agent_path": `D:\wsu\wsu-1.2.3.exe`, "wsu_agent_args": "--hash-cache C:\\k\\cache.json"},
			check: func(t *testing.T, c Config) {
				if c.AgentPath != `D:\wsu\wsu-1.2.3.exe` || strings.Join(c.AgentArgs, "|") != `--hash-cache|C:\k\cache.json` {
					t.Errorf("%+v", c)
				}
			}},
		{name: "envelope", vars: map[string]string{"winrm_max_envelope_size": "153600"},
			check: func(t *testing.T, c Config) {
				if c.MaxEnvelopeSize != 153600 {
					t.Errorf("%+v", c)
				}
			}},
		{name: "windows", vars: map[string]string{"wsu_remote_os": "Windows"}},

		{name: "bad scheme", vars: map[string]string{"ansible_winrm_scheme": "ftp"}, err: "ansible_winrm_scheme"},
		{name: "http without opting in to plain text", vars: map[string]string{"ansible_winrm_scheme": "http"},
			err: "ansible_winrm_scheme is http, which would send every message"},
		{name: "basic over http with message encryption auto", vars: map[string]string{"ansible_winrm_scheme": "http", "ansible_port": "5985", "ansible_winrm_transport": "basic", "ansible_winrm_message_encryption": "auto"},
			err: "ansible_winrm_message_encryption=never"},
		{name: "message encryption always", vars: map[string]string{"ansible_winrm_message_encryption": "always"},
			err: "ansible_winrm_message_encryption is always, but wsu does not implement WinRM message encryption"},
		{name: "bad message encryption", vars: map[string]string{"ansible_winrm_message_encryption": "sometimes"},
			err: "must be auto, always or never"},
		{name: "bad port", vars: map[string]string{"ansible_port": "70000"}, err: "ansible_port"},
		{name: "kerberos", vars: map[string]string{"ansible_winrm_transport": "kerberos"}, err: "use ntlm or basic"},
		{name: "bad validation", vars: map[string]string{"ansible_winrm_server_cert_validation": "no"}, err: "validate or ignore"},
		{name: "missing CA file", vars: map[string]string{"winrm_ca_file": "/nonexistent/ca.pem"}, err: "winrm_ca_file"},
		{name: "CA file without PEM", vars: map[string]string{"winrm_ca_file": notPEM}, err: "no PEM certificate"},
		{name: "read timeout not above operation timeout",
			vars: map[string]string{"ansible_winrm_read_timeout_sec": "20"}, err: "must exceed"},
		{name: "bad timeout", vars: map[string]string{"ansible_winrm_operation_timeout_sec": "soon"}, err: "seconds"},
		{name: "path with a space", vars: map[string]string{"wsu_agent_path": `C:\Program Files\wsu.exe`}, err: "no spaces"},
		{name: "relative path", vars: map[string]string{"wsu_agent_path": `wsu.exe`}, err: "wsu_agent_path"},
		{name: "path with a quote", vars: map[string]string{"wsu_agent_path": `C:\k\it's.exe`}, err: "wsu_agent_path"},
		{name: "arg for cmd.exe", vars: map[string]string{"wsu_agent_args": "--x & calc"}, err: "wsu_agent_args"},
		{name: "linux", vars: map[string]string{"wsu_remote_os": "linux"}, err: "Windows hosts only"},
		{name: "tiny envelope", vars: map[string]string{"winrm_max_envelope_size": "100"}, err: "winrm_max_envelope_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.vars["wsu_agent_binary"] = "/opt/wsu.exe"
			cfg, err := ConfigFromVars("win01", strVars(tc.vars))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestConfigTypedVars(t *testing.T) {
	// YAML inventories give numbers and lists.
	vars := map[string]inventory.Var{
		"ansible_port":     {Value: cty.NumberIntVal(5985)},
		"wsu_agent_args":   {Value: cty.TupleVal([]cty.Value{cty.StringVal("--sim-hostname"), cty.StringVal("n1")})},
		"wsu_agent_binary": {Value: cty.StringVal("/opt/wsu.exe")},
	}
	cfg, err := ConfigFromVars("win01", vars)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 5985 || !cfg.HTTPS || strings.Join(cfg.AgentArgs, " ") != "--sim-hostname n1" {
		t.Errorf("%+v", cfg)
	}

	// Errors point at where the variable was set.
	vars = map[string]inventory.Var{"ansible_winrm_transport": {
		Value: cty.StringVal("credssp"),
		Range: hcl.Range{Filename: "hosts.ini", Start: hcl.Pos{Line: 3, Column: 9}, End: hcl.Pos{Line: 3, Column: 16}},
	}}
	_, err = ConfigFromVars("win01", vars)
	if err == nil || !strings.HasPrefix(err.Error(), "hosts.ini:3:9") {
		t.Fatalf("err = %v, want it located at hosts.ini:3:9", err)
	}

	// Plain HTTP without the opt-in names the scheme and where it was set.
	vars = map[string]inventory.Var{
		"ansible_winrm_scheme":    {Value: cty.StringVal("http"), Range: hcl.Range{Filename: "hosts.ini", Start: hcl.Pos{Line: 7, Column: 1}, End: hcl.Pos{Line: 7, Column: 25}}},
		"ansible_winrm_transport": {Value: cty.StringVal("basic")},
		"wsu_agent_binary":        {Value: cty.StringVal("/opt/wsu.exe")},
	}
	_, err = ConfigFromVars("win01", vars)
	if err == nil || !strings.HasPrefix(err.Error(), "hosts.ini:7:1") || !strings.Contains(err.Error(), "ansible_winrm_scheme is http") {
		t.Fatalf("err = %v, want it located at hosts.ini:7:1 and naming ansible_winrm_scheme", err)
	}
}

func TestSmallerEnvelope(t *testing.T) {
	got := []int64{}
	for cur := int64(DefaultMaxEnvelopeSize); cur > minEnvelopeSize; cur = smallerEnvelope(cur) {
		got = append(got, cur)
	}
	if got[0] != 512000 || got[1] != 153600 || got[len(got)-1] < minEnvelopeSize {
		t.Fatalf("sizes tried: %v", got)
	}
}

func TestParseFault(t *testing.T) {
	body := `<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:w="http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd"><s:Header/><s:Body><s:Fault><s:Code><s:Value>s:Receiver</s:Value><s:Subcode><s:Value>w:TimedOut</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang="en-US">The WS-Management service cannot complete the operation within the time specified in OperationTimeout.  </s:Text></s:Reason><s:Detail><f:WSManFault xmlns:f="http://schemas.microsoft.com/wbem/wsman/1/wsmanfault" Code="2150858793" Machine="host"><f:Message></f:Message></f:WSManFault></s:Detail></s:Fault></s:Body></s:Envelope>`
	f := parseFault(body)
	if f == nil || !f.TimedOut() || f.EncodingLimit() || f.WSManCode != "2150858793" {
		t.Fatalf("parseFault = %+v", f)
	}
	if !isTimedOut(f) || !strings.Contains(f.Error(), "OperationTimeout") {
		t.Errorf("%v", f)
	}
	if parseFault(`<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><rsp:ReceiveResponse/></s:Body></s:Envelope>`) != nil {
		t.Error("a normal answer parsed as a fault")
	}
}

func TestCleanStderr(t *testing.T) {
	clixml := `#< CLIXML
<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04"><S S="Error">Move-Item : Access to the path is denied._x000D__x000A_</S><S S="Error">At line:1 char:1_x000D__x000A_</S></Objs>`
	if got := cleanStderr(clixml); got != "Move-Item : Access to the path is denied.\nAt line:1 char:1" {
		t.Errorf("cleanStderr = %q", got)
	}
	if got := cleanStderr("  plain\r\n"); got != "plain" {
		t.Errorf("cleanStderr = %q", got)
	}
}

func TestBootstrapCommand(t *testing.T) {
	line := strings.Replace(bootstrapCommand, "%s", `C:\k\wsu\wsu-1.exe`, 1)
	// cmd.exe passes what is inside the double quotes to PowerShell: no
	// other double quote, no %, no line break may appear in it.
	inner := strings.TrimSuffix(strings.SplitN(line, `-Command "`, 2)[1], `"`)
	if strings.ContainsAny(inner, "\"%\r\n") {
		t.Fatalf("the script has characters cmd.exe would act on: %s", inner)
	}
	if len(line) > 1000 {
		t.Errorf("the bootstrap is %d characters; keep it tiny", len(line))
	}
	if strings.Count(bootstrapCommand, "%s") != 1 || strings.Count(bootstrapCommand, "%") != 1 {
		t.Error("the bootstrap must hold exactly one verb, for the path, and no other percent sign")
	}
}

// Without wsu_agent_binary the run's windows/amd64 build is deployed; a
// missing one fails before any connection, saying how to get it.
func TestDialAgentBuild(t *testing.T) {
	cfg, err := ConfigFromVars("win01", strVars(map[string]string{}))
	if err != nil || cfg.AgentBinary != "" {
		t.Fatalf("cfg.AgentBinary = %q, err = %v: the default build is the Dialer's", cfg.AgentBinary, err)
	}
	vars := strVars(map[string]string{"ansible_port": "1"})
	_, err = Dialer{Agents: agentbin.New(agentbin.Options{Dir: t.TempDir()})}.Dial(context.Background(), "win01", vars)
	if err == nil || !strings.Contains(err.Error(), "host win01: this wsu carries no agent for windows/amd64") || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("err = %v", err)
	}
	_, err = Dial(context.Background(), "win01", vars)
	if err == nil || !strings.Contains(err.Error(), "set wsu_agent_binary") {
		t.Fatalf("without a Source: err = %v", err)
	}
}
