package playbooks_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/playbooks"
)

// exporterPlan is a plan of windows-exporter.hcl: its changes by task
// address, and the diagnostics of the tasks that failed.
type exporterPlan struct {
	changes map[string]*engine.ChangeView
	res     *engine.Result
	failed  []string
}

// planExporter plans windows-exporter.hcl with vars on a fresh simulated
// host, without publishing (no cluster).
func planExporter(t *testing.T, vars ...string) exporterPlan {
	t.Helper()
	loader := playbook.NewLoader(all.Schemas(), playbooks.FS)
	pb, diags := loader.Load("wsu:windows-exporter.hcl")
	require.False(t, diags.HasErrors(), diags.Error())
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nwin-1\n"))
	require.False(t, diags.HasErrors(), diags.Error())
	root := t.TempDir()
	var mu sync.Mutex
	p := exporterPlan{changes: map[string]*engine.ChangeView{}}
	p.res = engine.Run(context.Background(), engine.Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs:    engine.Inputs{Vars: append([]string{"node_name=win-1", "node_ip=10.0.0.5", "namespace=kube-system", "publish=false"}, vars...)},
		Mode:      engine.ModePlan,
		Registry:  all.Registry(all.Options{Clusters: kube.NewCache(kube.Defaults{})}),
		Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
			return sim.New(filepath.Join(root, "win-1"), sim.Options{Hostname: "WIN-1", IPv4: "10.0.0.5"})
		}),
		Hooks: engine.HooksFunc(func(e engine.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Type == engine.EventTaskResult && e.Change != nil {
				p.changes[e.Address] = e.Change
			}
			for _, d := range e.Diagnostics {
				p.failed = append(p.failed, d.Summary+": "+d.Detail)
			}
		}),
		Sources: loader.Sources(),
	})
	return p
}

func exporterArgs(t *testing.T, changes map[string]*engine.ChangeView) []string {
	t.Helper()
	svc := changes[`task["exporter service"]`]
	require.NotNil(t, svc, "the service is planned")
	for _, f := range svc.Fields {
		if f.Name == "args" {
			var args []string
			require.NoError(t, json.Unmarshal([]byte(f.New), &args), "args rendered as %s", f.New)
			return args
		}
	}
	t.Fatal("no args in the service's plan")
	return nil
}

// added is the text a file's plan diff adds.
func added(c *engine.ChangeView) string {
	var lines []string
	for _, l := range strings.Split(c.Diff, "\n") {
		if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ ") {
			lines = append(lines, l[1:])
		}
	}
	return strings.Join(lines, "\n")
}

const (
	exporterCert = "-----BEGIN CERTIFICATE-----\nMIIBexportercert\n-----END CERTIFICATE-----\n"
	exporterKey  = "-----BEGIN PRIVATE KEY-----\nMIIEexportersecretkey\n-----END PRIVATE KEY-----\n"
)

// TestWindowsExporterTLS: with tls_cert and tls_key the plan writes the
// certificate, the key (administrators only, its text never in the plan)
// and WMCO's web config naming them, and the service runs with
// --web.config.file; without them it is plain HTTP and no TLS file is
// planned; one without the other is refused.
func TestWindowsExporterTLS(t *testing.T) {
	p := planExporter(t, "tls_cert="+exporterCert, "tls_key="+exporterKey)
	require.False(t, p.res.Failed(), "plan: %s", p.failed)
	changes := p.changes
	const webConfig = `C:\k\tls\windows-exporter-webconfig.yaml`
	args := exporterArgs(t, changes)
	assert.Equal(t, []string{"--web.config.file", webConfig}, args[len(args)-2:])

	wc := changes[`task["exporter web config"]`]
	require.NotNil(t, wc, "the web config is planned")
	assert.Equal(t, "tls_server_config:\n"+
		`  cert_file: "C:\\k\\tls\\windows-exporter.crt"`+"\n"+
		`  key_file: "C:\\k\\tls\\windows-exporter.key"`, added(wc))

	cert := changes[`task["exporter certificate"]`]
	require.NotNil(t, cert, "the certificate is planned")
	assert.Contains(t, added(cert), "MIIBexportercert")

	key := changes[`task["exporter key"]`]
	require.NotNil(t, key, "the key is planned")
	for _, f := range key.Fields {
		switch f.Name {
		case "acl":
			assert.Contains(t, f.New, "allow SYSTEM full, allow Administrators full", "the key's ACL")
		default:
			assert.True(t, f.Sensitive, "the key's %s is not shown", f.Name)
		}
	}
	for addr, c := range changes {
		text, err := json.Marshal(c)
		require.NoError(t, err)
		assert.NotContains(t, string(text), "exportersecretkey", "%s shows the key", addr)
	}

	p = planExporter(t)
	require.False(t, p.res.Failed(), "plan: %s", p.failed)
	changes = p.changes
	assert.NotContains(t, exporterArgs(t, changes), "--web.config.file")
	for _, task := range []string{"exporter tls directory", "exporter certificate", "exporter key", "exporter web config"} {
		assert.Nil(t, changes[`task["`+task+`"]`], "%s without TLS", task)
	}

	p = planExporter(t, "tls_cert="+exporterCert)
	require.True(t, p.res.Failed(), "a certificate without its key")
	assert.Contains(t, strings.Join(p.failed, "\n"), "tls_cert and tls_key are set together")
}
