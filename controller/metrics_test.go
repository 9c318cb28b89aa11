package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
)

// TestInstanceMetrics: the series the alerts read follow an instance's
// status: its consecutive failures, its Node (one series, the current
// Node's), none of its own after it is forgotten; the CSR counters exist
// at 0 from the start, so a first refusal is an increase.
func TestInstanceMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics()
	require.NoError(t, m.register(reg))
	expect := func(want map[string]float64) {
		t.Helper()
		assert.Equal(t, want, gathered(t, reg, "wsu_instance_failures", "wsu_instance_info", "wsu_csrs_total"))
	}
	expect(map[string]float64{
		`wsu_csrs_total{decision="approved"}`: 0,
		`wsu_csrs_total{decision="refused"}`:  0,
	})

	wi := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "wsu", Name: "a"}}
	wi.Status.Phase, wi.Status.Failures = wsuv1.PhaseFailed, 3
	m.instance(wi)
	m.csr("refused")
	expect(map[string]float64{
		`wsu_csrs_total{decision="approved"}`:             0,
		`wsu_csrs_total{decision="refused"}`:              1,
		`wsu_instance_failures{name="a",namespace="wsu"}`: 3,
	})

	wi.Status.Phase, wi.Status.Failures, wi.Status.NodeName = wsuv1.PhaseJoined, 0, "win-a"
	m.instance(wi)
	expect(map[string]float64{
		`wsu_csrs_total{decision="approved"}`:                      0,
		`wsu_csrs_total{decision="refused"}`:                       1,
		`wsu_instance_failures{name="a",namespace="wsu"}`:          0,
		`wsu_instance_info{name="a",namespace="wsu",node="win-a"}`: 1,
	})

	wi.Status.NodeName = "win-a2"
	m.instance(wi)
	other := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "wsu", Name: "b"}}
	other.Status.NodeName = "win-b"
	m.instance(other)
	expect(map[string]float64{
		`wsu_csrs_total{decision="approved"}`:                       0,
		`wsu_csrs_total{decision="refused"}`:                        1,
		`wsu_instance_failures{name="a",namespace="wsu"}`:           0,
		`wsu_instance_failures{name="b",namespace="wsu"}`:           0,
		`wsu_instance_info{name="a",namespace="wsu",node="win-a2"}`: 1,
		`wsu_instance_info{name="b",namespace="wsu",node="win-b"}`:  1,
	})

	m.forget(wi)
	expect(map[string]float64{
		`wsu_csrs_total{decision="approved"}`:                      0,
		`wsu_csrs_total{decision="refused"}`:                       1,
		`wsu_instance_failures{name="b",namespace="wsu"}`:          0,
		`wsu_instance_info{name="b",namespace="wsu",node="win-b"}`: 1,
	})
}

// gathered is reg's series of the named metrics, by name and labels
// (sorted by name, as the exposition format writes them).
func gathered(t *testing.T, reg *prometheus.Registry, names ...string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := s.GetGauge().GetValue() + s.GetCounter().GetValue()
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// TestAlertMetricsExist: every wsu_ series the shipped alerts
// (deploy/components/prometheus/rules) read is one the controller serves,
// so a renamed metric cannot silently disarm an alert.
func TestAlertMetricsExist(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics()
	require.NoError(t, m.register(reg))
	wi := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "wsu", Name: "a"}}
	wi.Status.NodeName = "win-a"
	m.instance(wi)
	m.drifted(wi, true)
	m.observeRun("wsu:join.hcl", "apply", run.Outcome{}, 0)
	families, err := reg.Gather()
	require.NoError(t, err)
	served := map[string]bool{}
	for _, f := range families {
		served[f.GetName()] = true
	}

	data, err := os.ReadFile(filepath.Join("..", "deploy", "components", "prometheus", "rules", "prometheusrule.yaml"))
	require.NoError(t, err)
	var pr struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(data, &pr))
	read := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			for _, name := range regexp.MustCompile(`\bwsu_[a-z_]+`).FindAllString(r.Expr, -1) {
				read++
				assert.True(t, served[name], "%s reads %s, which the controller does not serve", r.Alert, name)
			}
		}
	}
	assert.Positive(t, read, "the alerts read wsu_ metrics")
}
