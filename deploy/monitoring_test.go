package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kubemod "github.com/wsu-project/wsu/modules/kube"
)

// Where Debian's prometheus package puts promtool, and how to install it.
const (
	promtool               = "/usr/bin/promtool"
	promtoolInstallCommand = "apt-get update && apt-get install -y --no-install-recommends prometheus"
)

// rulesFile is the PrometheusRule components/prometheus and the openshift
// overlay ship.
var rulesFile = filepath.Join("components", "prometheus", "rules", "prometheusrule.yaml")

// prometheusRule is the part of a PrometheusRule the tests read.
type prometheusRule struct {
	Kind string `json:"kind"`
	Spec struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TestAlertRules runs Prometheus' own checks on the shipped alerts: the
// PrometheusRule's spec.groups, written out as a plain rules file (what a
// Prometheus without the operator reads from rule_files), pass `promtool
// check rules`, and testdata/alerts.test.yaml's rule tests pass `promtool
// test rules`. That file must test every alert both firing and not firing.
func TestAlertRules(t *testing.T) {
	tool := ensurePromtool(t)
	pr := readPrometheusRule(t)
	dir := t.TempDir()
	groups, err := plainRules(t)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o600))
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o600))

	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts.test.yaml"}} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}

	firing, silent := alertTests(t, tests)
	for _, a := range alerts(pr) {
		assert.True(t, firing[a.Alert], "%s has no rule test where it fires", a.Alert)
		assert.True(t, silent[a.Alert], "%s has no rule test where it does not fire", a.Alert)
	}
}

// TestAlertRunbooks: every alert carries a severity, a summary, a
// description and a runbook_url into docs/controller.md whose anchor is
// one of its headings.
func TestAlertRunbooks(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "controller.md"))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllSubmatch(doc, -1) {
		anchors[githubAnchor(string(m[1]))] = true
	}
	const prefix = "https://github.com/wsu-project/wsu/blob/main/docs/controller.md#"
	as := alerts(readPrometheusRule(t))
	require.Len(t, as, 5)
	for _, a := range as {
		assert.Contains(t, []string{"info", "warning", "critical"}, a.Labels["severity"], a.Alert)
		assert.NotEmpty(t, a.Annotations["summary"], a.Alert)
		assert.NotEmpty(t, a.Annotations["description"], a.Alert)
		url := a.Annotations["runbook_url"]
		require.True(t, strings.HasPrefix(url, prefix), "%s: runbook_url %q", a.Alert, url)
		assert.True(t, anchors[strings.TrimPrefix(url, prefix)], "%s: docs/controller.md has no heading for %s", a.Alert, url)
	}
}

// githubAnchor is the id GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// plainRules is the PrometheusRule's spec.groups as a Prometheus rules
// file, every field as it is.
func plainRules(t *testing.T) ([]byte, error) {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var pr struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(data, &pr))
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

func readPrometheusRule(t *testing.T) prometheusRule {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var pr prometheusRule
	require.NoError(t, yaml.Unmarshal(data, &pr))
	require.Equal(t, "PrometheusRule", pr.Kind)
	return pr
}

func alerts(pr prometheusRule) []rule {
	var out []rule
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// alertTests reads a promtool test file: the alerts some test expects to
// fire, and those some test expects not to.
func alertTests(t *testing.T, data []byte) (firing, silent map[string]bool) {
	t.Helper()
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(data, &f))
	firing, silent = map[string]bool{}, map[string]bool{}
	for _, tt := range f.Tests {
		for _, a := range tt.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	return firing, silent
}

var promtoolInstall sync.Mutex

// ensurePromtool returns promtool's path, installing Debian's prometheus
// package first when it is missing and the test runs as root. Without
// root the test fails, naming the command that installs it.
func ensurePromtool(t *testing.T) string {
	t.Helper()
	promtoolInstall.Lock()
	defer promtoolInstall.Unlock()
	if _, err := os.Stat(promtool); err == nil {
		return promtool
	}
	if os.Geteuid() != 0 {
		t.Fatalf("promtool (Debian package prometheus) is missing and this process is not running as root; install it with:\n  sudo sh -c '%s'", promtoolInstallCommand)
	}
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "prometheus"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if _, err := os.Stat(promtool); err != nil {
		t.Fatal(fmt.Errorf("%s is still missing after installing prometheus", promtool))
	}
	return promtool
}

// TestPrometheusComponent renders components/prometheus on the kubernetes
// overlay, as its comment tells an admin to: the controller's and the
// exporters' ServiceMonitors and the PrometheusRule land in wsu's
// namespace, and the exporters' ServiceMonitor selects the Service join's
// k8s_metrics_endpoint publishes in join's default metrics namespace,
// over HTTPS for the name its certificate must carry.
func TestPrometheusComponent(t *testing.T) {
	out, err := Render(filepath.Join("testdata", "prometheus-component"), "testdata/prometheus-component")
	require.NoError(t, err)
	objs := map[string]*unstructured.Unstructured{}
	for _, u := range decodeObjects(t, out) {
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	for _, k := range []string{"ServiceMonitor/wsu-controller", "ServiceMonitor/windows-exporter", "PrometheusRule/wsu-controller"} {
		require.Contains(t, objs, k)
		assert.Equal(t, KubernetesNamespace, objs[k].GetNamespace(), k)
	}
	require.Contains(t, objs, "ClusterRoleBinding/wsu-metrics-reader")

	sm := objs["ServiceMonitor/windows-exporter"].Object
	ns, _, _ := unstructured.NestedStringSlice(sm, "spec", "namespaceSelector", "matchNames")
	assert.Equal(t, []string{"kube-system"}, ns, "join's metrics_namespace on kubeadm clusters")
	sel, _, _ := unstructured.NestedStringMap(sm, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]string{"name": "windows-exporter", "app.kubernetes.io/managed-by": kubemod.ManagedBy}, sel,
		"the labels k8s_metrics_endpoint puts on its Service")
	eps, _, _ := unstructured.NestedSlice(sm, "spec", "endpoints")
	require.Len(t, eps, 1)
	ep := eps[0].(map[string]any)
	assert.Equal(t, "metrics", ep["port"])
	assert.Equal(t, "https", ep["scheme"])
	server, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
	assert.Equal(t, "windows-exporter.kube-system.svc", server)
	_, skip, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
	assert.False(t, skip, "the nodes' certificates are verified")
}

// TestOpenShiftExporterServiceMonitor renders the openshift overlay: its
// exporters' ServiceMonitor selects the Service join publishes in WMCO's
// namespace, and verifies the nodes' certificates (the service CA's, which
// join asks for with the Service's serving-cert annotation) with the
// platform Prometheus' service CA bundle, for the Service's name.
func TestOpenShiftExporterServiceMonitor(t *testing.T) {
	out, err := Render(filepath.Join("overlays", "openshift"), "overlays/openshift")
	require.NoError(t, err)
	var sm map[string]any
	for _, u := range decodeObjects(t, out) {
		if u.GetKind() == "ServiceMonitor" && u.GetName() == "windows-exporter" {
			sm = u.Object
		}
	}
	require.NotNil(t, sm, "the openshift overlay has the exporters' ServiceMonitor")
	const wmcoNS = "openshift-windows-machine-config-operator"
	ns, _, _ := unstructured.NestedStringSlice(sm, "spec", "namespaceSelector", "matchNames")
	assert.Equal(t, []string{wmcoNS}, ns, "join's metrics_namespace on OpenShift")
	sel, _, _ := unstructured.NestedStringMap(sm, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]string{"name": "windows-exporter", "app.kubernetes.io/managed-by": kubemod.ManagedBy}, sel,
		"the labels k8s_metrics_endpoint puts on its Service")
	eps, _, _ := unstructured.NestedSlice(sm, "spec", "endpoints")
	require.Len(t, eps, 1)
	ep := eps[0].(map[string]any)
	assert.Equal(t, "https", ep["scheme"])
	ca, _, _ := unstructured.NestedString(ep, "tlsConfig", "caFile")
	assert.Equal(t, "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt", ca, "the service CA, which signs the nodes' certificate")
	server, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
	assert.Equal(t, "windows-exporter."+wmcoNS+".svc", server, "the name the service CA puts in the Service's certificate")
	_, skip, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
	assert.False(t, skip, "the nodes' certificates are verified")
}
