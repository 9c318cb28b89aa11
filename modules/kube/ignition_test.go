package kube

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

func diagSummaries(diags hcl.Diagnostics) []string {
	var s []string
	for _, d := range diags {
		s = append(s, d.Summary)
	}
	return s
}

func ignFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "kube", "testdata", "ignition", name))
	require.NoError(t, err)
	return b
}

// testMCS serves spec 2.2 to Ignition 0.x and spec 3.2 to everyone else.
func testMCS(t *testing.T) (url, ca string, userAgents func() []string) {
	spec2, spec24, spec3 := ignFixture(t, "spec2.2.json"), ignFixture(t, "spec2.4.json"), ignFixture(t, "spec3.2.json")
	var mu sync.Mutex
	var uas []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		uas = append(uas, r.Header.Get("User-Agent"))
		mu.Unlock()
		if r.URL.RawQuery == "spec24" {
			w.Write(spec24)
			return
		}
		if r.URL.RawQuery == "garbage" {
			w.Write([]byte("<html>proxy error</html>"))
			return
		}
		if strings.HasPrefix(r.Header.Get("User-Agent"), "Ignition/0.") {
			w.Write(spec2)
			return
		}
		w.Write(spec3)
	}))
	t.Cleanup(srv.Close)
	ca = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return srv.URL + "/config/worker", ca, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), uas...)
	}
}

func TestIgnitionFromMCSIsARead(t *testing.T) {
	url, ca, uas := testMCS(t)
	m := Ignition{testClusters}
	tests := []struct {
		name      string
		spec      int64
		wantSpec  string
		wantCloud string
		wantUA    string
	}{
		{"spec 3", 3, "3.2.0", "external", "wsu/"},
		{"spec 2", 2, "2.2.0", "aws", "Ignition/0.35.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, m, map[string]cty.Value{
				"source": cty.StringVal("mcs"), "url": cty.StringVal(url), "ca": cty.StringVal(ca),
				"spec_version": cty.NumberIntVal(tt.spec),
			})
			require.Empty(t, m.Validate(modules.ValidateRequest{Config: cfg}))
			resp := m.Plan(context.Background(), modules.PlanRequest{Config: cfg})
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			assert.Nil(t, resp.Change, "a read never plans a change")
			checkResult(t, m, resp.Result)
			require.True(t, resp.Result.IsWhollyKnown(), "known at plan time")
			r := resp.Result.AsValueMap()
			assert.Equal(t, string(ignFixture(t, "want-kubeconfig")), r["bootstrap_kubeconfig"].AsString())
			assert.Equal(t, string(ignFixture(t, "want-kubelet-ca.crt")), r["kubelet_ca"].AsString())
			server, ca, err := kube.KubeconfigServer(ignFixture(t, "want-kubeconfig"))
			require.NoError(t, err)
			assert.Equal(t, server, r["api_server"].AsString(), "the bootstrap kubeconfig's server")
			assert.Equal(t, string(ca), r["api_ca"].AsString(), "and CA")
			assert.NotEmpty(t, server)
			assert.NotEmpty(t, ca)
			assert.Equal(t, tt.wantCloud, r["cloud_provider"].AsString())
			assert.Equal(t, "cloud.conf", r["cloud_config_name"].AsString())
			assert.Equal(t, string(ignFixture(t, "want-cloud-aws.conf")), r["cloud_config"].AsString())
			assert.Equal(t, tt.wantSpec, r["spec_version"].AsString())
			assert.Equal(t, url, r["from"].AsString())
			got := uas()
			assert.True(t, strings.HasPrefix(got[len(got)-1], tt.wantUA), got)
		})
	}
}

// Absent flags and files are null, so playbooks can test `!= null`.
func TestIgnitionAbsentValuesAreNull(t *testing.T) {
	url, ca, _ := testMCS(t)
	m := Ignition{testClusters}
	resp := m.Plan(ctx, modules.PlanRequest{Config: cfgFor(t, m, map[string]cty.Value{
		"source": cty.StringVal("mcs"), "url": cty.StringVal(url + "?spec24"), "ca": cty.StringVal(ca)})})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	checkResult(t, m, resp.Result)
	r := resp.Result.AsValueMap()
	assert.Equal(t, "2.4.0", r["spec_version"].AsString())
	for _, name := range []string{"cloud_provider", "cloud_config_name", "cloud_config"} {
		assert.True(t, r[name].IsNull(), "%s is null (--cloud-provider= is empty, no --cloud-config)", name)
	}
	assert.Equal(t, "2", r["kubelet_verbosity"].AsString())
	assert.False(t, r["bootstrap_kubeconfig"].IsNull())
}

func TestIgnitionSensitiveResults(t *testing.T) {
	sensitive := map[string]bool{}
	for _, a := range (Ignition{testClusters}).Schema().Results {
		sensitive[a.Name] = a.Sensitive
	}
	assert.True(t, sensitive["bootstrap_kubeconfig"])
	assert.True(t, sensitive["cloud_config"])
	assert.False(t, sensitive["kubelet_ca"])
}

func TestIgnitionPlanErrors(t *testing.T) {
	url, ca, _ := testMCS(t)
	m := Ignition{testClusters}
	wrongCA := strings.Replace(ca, "MII", "MIJ", 1)
	tests := []struct {
		name   string
		attrs  map[string]cty.Value
		detail string
	}{
		{"no CA: system roots refuse the test CA", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal(url)}, "unknown authority"},
		{"corrupt CA", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal(url), "ca": cty.StringVal(wrongCA)}, "no PEM certificate"},
		{"malformed config", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal(url + "?garbage"), "ca": cty.StringVal(ca)}, "ignition: not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := m.Plan(context.Background(), modules.PlanRequest{Config: cfgFor(t, m, tt.attrs)})
			require.True(t, resp.Diagnostics.HasErrors())
			checkResult(t, m, resp.Result)
			assert.Equal(t, "Cannot read the worker Ignition config", resp.Diagnostics[0].Summary)
			assert.Contains(t, resp.Diagnostics[0].Detail, tt.detail)
		})
	}
}

func TestIgnitionUnknownArgumentsDeferTheRead(t *testing.T) {
	m := Ignition{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.UnknownVal(cty.String)})
	resp := m.Plan(context.Background(), modules.PlanRequest{Config: cfg})
	assert.Empty(t, resp.Diagnostics)
	assert.Nil(t, resp.Change)
	checkResult(t, m, resp.Result)
	assert.False(t, resp.Result.GetAttr("kubelet_ca").IsKnown())
}

func TestIgnitionValidate(t *testing.T) {
	m := Ignition{testClusters}
	tests := []struct {
		name  string
		attrs map[string]cty.Value
		want  []string // error summaries
	}{
		{"mcs ok", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("api-int.c.example.com")}, nil},
		{"machineconfig ok", map[string]cty.Value{"source": cty.StringVal("machineconfig"), "api_server": cty.StringVal("https://api-int:6443")}, nil},
		{"bad source", map[string]cty.Value{"source": cty.StringVal("http")}, []string{"Invalid source"}},
		{"mcs without url", map[string]cty.Value{"source": cty.StringVal("mcs")}, []string{"Missing url"}},
		{"mcs http url", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("http://x:22623/config/worker")}, []string{"Invalid url"}},
		{"spec 1", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("h"), "spec_version": cty.NumberIntVal(1)}, []string{"Invalid spec_version"}},
		{"spec 2.5", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("h"), "spec_version": cty.NumberFloatVal(2.5)}, []string{"Invalid spec_version"}},
		{"ignition version 2", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("h"), "ignition_version": cty.StringVal("2.2.0")}, []string{"Invalid ignition_version"}},
		{"insecure and ca", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("h"), "ca": cty.StringVal("x"), "insecure": cty.True}, []string{"insecure with a ca"}},
		{"zero timeout", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("h"), "timeout": cty.NumberIntVal(0)}, []string{"Invalid timeout"}},
		{"api_server with mcs", map[string]cty.Value{"source": cty.StringVal("mcs"), "url": cty.StringVal("h"), "api_server": cty.StringVal("https://x")}, []string{"api_server with the mcs source"}},
		{"url with machineconfig", map[string]cty.Value{"source": cty.StringVal("machineconfig"), "url": cty.StringVal("h")}, []string{"url with the machineconfig source"}},
		{"http api_server", map[string]cty.Value{"source": cty.StringVal("machineconfig"), "api_server": cty.StringVal("http://x")}, []string{"Invalid api_server"}},
		{"unknowns are fine", map[string]cty.Value{"source": cty.UnknownVal(cty.String), "url": cty.UnknownVal(cty.String)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags := m.Validate(modules.ValidateRequest{Config: cfgFor(t, m, tt.attrs)})
			assert.Equal(t, tt.want, diagSummaries(diags))
		})
	}
}
