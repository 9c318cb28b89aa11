package controller

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/engine"
)

// metrics are the controller's Prometheus metrics, served on the manager's
// metrics endpoint.
type metrics struct {
	runs       *prometheus.CounterVec
	runSeconds *prometheus.HistogramVec
	phases     *prometheus.GaugeVec
	drift      *prometheus.GaugeVec
	csrs       *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsu_runs_total", Help: "Playbook runs by playbook, mode and result.",
		}, []string{"playbook", "mode", "result"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wsu_run_seconds", Help: "Playbook run duration.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
		}, []string{"playbook", "mode"}),
		phases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wsu_instance_phase", Help: "1 for each instance's current phase.",
		}, []string{"namespace", "name", "phase"}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wsu_instance_drifted", Help: "1 when a joined instance's last plan found changes.",
		}, []string{"namespace", "name"}),
		csrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsu_csrs_total", Help: "Kubelet renewal CSRs of managed nodes, by decision (approved, refused).",
		}, []string{"decision"}),
	}
}

// register adds the metrics to controller-runtime's registry; a second
// controller in the same process (tests) shares the first one's.
func (m *metrics) register() error {
	var err error
	if m.runs, err = registerOrReuse(m.runs); err != nil {
		return err
	}
	if m.runSeconds, err = registerOrReuse(m.runSeconds); err != nil {
		return err
	}
	if m.phases, err = registerOrReuse(m.phases); err != nil {
		return err
	}
	if m.drift, err = registerOrReuse(m.drift); err != nil {
		return err
	}
	m.csrs, err = registerOrReuse(m.csrs)
	return err
}

func registerOrReuse[C prometheus.Collector](c C) (C, error) {
	err := ctrlmetrics.Registry.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// observeRun counts a finished run.
func (m *metrics) observeRun(playbook string, mode engine.Mode, out RunOutcome, took time.Duration) {
	result := "succeeded"
	switch {
	case out.Unreachable:
		result = "unreachable"
	case out.Failed:
		result = "failed"
	}
	m.runs.WithLabelValues(playbook, string(mode), result).Inc()
	m.runSeconds.WithLabelValues(playbook, string(mode)).Observe(took.Seconds())
}

// allPhases are the values of wsu_instance_phase's phase label.
var allPhases = []string{wsuv1.PhasePending, wsuv1.PhaseAwaitingApproval, wsuv1.PhaseJoining, wsuv1.PhaseJoined,
	wsuv1.PhaseUpgrading, wsuv1.PhaseRemoving, wsuv1.PhaseFailed, wsuv1.PhasePaused}

// instance records an instance's phase.
func (m *metrics) instance(wi *wsuv1.WindowsInstance) {
	for _, p := range allPhases {
		v := 0.0
		if p == wi.Status.Phase {
			v = 1
		}
		m.phases.WithLabelValues(wi.Namespace, wi.Name, p).Set(v)
	}
}

func (m *metrics) drifted(wi *wsuv1.WindowsInstance, drifted bool) {
	v := 0.0
	if drifted {
		v = 1
	}
	m.drift.WithLabelValues(wi.Namespace, wi.Name).Set(v)
}

// forget drops a removed instance's series.
func (m *metrics) forget(wi *wsuv1.WindowsInstance) {
	for _, p := range allPhases {
		m.phases.DeleteLabelValues(wi.Namespace, wi.Name, p)
	}
	m.drift.DeleteLabelValues(wi.Namespace, wi.Name)
}

func (m *metrics) csr(decision string) { m.csrs.WithLabelValues(decision).Inc() }
