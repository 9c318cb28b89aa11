package controller

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
)

// metrics are the controller's Prometheus metrics, served on the manager's
// metrics endpoint. deploy/components/prometheus/rules alerts on them
// (TestAlertMetricsExist checks every wsu_ series its rules read is here).
type metrics struct {
	runs       *prometheus.CounterVec
	runSeconds *prometheus.HistogramVec
	phases     *prometheus.GaugeVec
	drift      *prometheus.GaugeVec
	failures   *prometheus.GaugeVec
	info       *prometheus.GaugeVec
	csrs       *prometheus.CounterVec
}

// csrDecisions are the values of wsu_csrs_total's decision label.
var csrDecisions = []string{"approved", "refused"}

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
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wsu_instance_failures", Help: "Consecutive failed runs of an instance (status.failures); 0 after a success.",
		}, []string{"namespace", "name"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wsu_instance_info", Help: "1 for each instance with a Node, labelled with the Node's name (status.nodeName).",
		}, []string{"namespace", "name", "node"}),
		csrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsu_csrs_total", Help: "Kubelet renewal CSRs of managed nodes, by decision (approved, refused).",
		}, []string{"decision"}),
	}
}

// register adds the metrics to reg (controller-runtime's registry, served
// on the metrics endpoint); a second controller in the same process (tests)
// shares the first one's. The CSR counters start at 0 so that the first
// refusal is an increase an alert sees (WSUCSRRefused).
func (m *metrics) register(reg prometheus.Registerer) error {
	var err error
	if m.runs, err = registerOrReuse(reg, m.runs); err != nil {
		return err
	}
	if m.runSeconds, err = registerOrReuse(reg, m.runSeconds); err != nil {
		return err
	}
	if m.phases, err = registerOrReuse(reg, m.phases); err != nil {
		return err
	}
	if m.drift, err = registerOrReuse(reg, m.drift); err != nil {
		return err
	}
	if m.failures, err = registerOrReuse(reg, m.failures); err != nil {
		return err
	}
	if m.info, err = registerOrReuse(reg, m.info); err != nil {
		return err
	}
	if m.csrs, err = registerOrReuse(reg, m.csrs); err != nil {
		return err
	}
	for _, d := range csrDecisions {
		m.csrs.WithLabelValues(d)
	}
	return nil
}

func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// observeRun counts a finished run.
func (m *metrics) observeRun(playbook string, mode engine.Mode, out run.Outcome, took time.Duration) {
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

// instance records an instance's phase, its consecutive failures and its
// Node (the alerts' WSUInstanceRunsFailing and WSUNodeNotReadyAfterJoin).
func (m *metrics) instance(wi *wsuv1.WindowsInstance) {
	for _, p := range allPhases {
		v := 0.0
		if p == wi.Status.Phase {
			v = 1
		}
		m.phases.WithLabelValues(wi.Namespace, wi.Name, p).Set(v)
	}
	m.failures.WithLabelValues(wi.Namespace, wi.Name).Set(float64(wi.Status.Failures))
	m.info.DeletePartialMatch(instanceLabels(wi))
	if wi.Status.NodeName != "" {
		m.info.WithLabelValues(wi.Namespace, wi.Name, wi.Status.NodeName).Set(1)
	}
}

func instanceLabels(wi *wsuv1.WindowsInstance) prometheus.Labels {
	return prometheus.Labels{"namespace": wi.Namespace, "name": wi.Name}
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
	m.failures.DeleteLabelValues(wi.Namespace, wi.Name)
	m.info.DeletePartialMatch(instanceLabels(wi))
}

func (m *metrics) csr(decision string) { m.csrs.WithLabelValues(decision).Inc() }
