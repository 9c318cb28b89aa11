// Package controller is wsu's cluster face: a controller-runtime manager that
// keeps WindowsInstances (wsu.dev/v1alpha1) joined to the cluster, and turns
// the BYOH windows-instances ConfigMap WMCO users already keep into
// WindowsInstances it owns.
//
// The controller is a thin caller of the same run setup the CLI uses
// (package setup): every join, remove and drift check is a plan and then an
// apply of the stock (or a site's) playbooks by the one engine, so a
// playbook behaves the same from `wsu apply` and in the cluster. What the
// controller adds is what a cluster needs around a run: per-instance status
// with conditions, plan approval by hash, finalizers that deconfigure a host
// before its object goes, upgrades when the payload version changes with at
// most maxUnavailable instances out of service at once, per-instance
// exponential backoff (an unreachable host never delays another), bounded
// concurrency, events and metrics.
//
// Reconcile is level-based: each pass plans the instance's playbook against
// the host as it is; no changes means joined and in sync, changes mean a
// first join, a correction or drift, decided by the conditions already
// recorded. Nothing is kept in memory between passes except the runner's
// work, so a restarted controller converges from status alone.
package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/kube"
)

// Defaults of Options.
const (
	// DefaultNamespace is WMCO's, where its users keep the BYOH ConfigMap
	// and the cloud-private-key Secret (one constant with `wsu approve`'s
	// default).
	DefaultNamespace = approval.DefaultNamespace
	// DefaultConfigMap is the BYOH ConfigMap's name.
	DefaultConfigMap      = "windows-instances"
	DefaultMaxRuns        = 10
	DefaultDriftInterval  = 10 * time.Minute
	DefaultBackoff        = 10 * time.Second
	DefaultMaxBackoff     = 10 * time.Minute
	DefaultNodeReadyCheck = time.Minute
	DefaultPayloadCheck   = time.Minute
)

// DefaultMaxUnavailable is Options.MaxUnavailable's default: one node out
// of service at a time.
var DefaultMaxUnavailable = intstr.FromInt32(1)

// Options configure the controller.
type Options struct {
	// Namespace holds the WindowsInstances, and the Secrets and ConfigMaps
	// they name.
	Namespace string
	// BYOHNamespace holds the BYOH ConfigMap and the default key Secret
	// (cloud-private-key, for instances without a keySecretRef); default
	// Namespace. On OpenShift it is WMCO's namespace while wsu has its own:
	// the controller then reads those two objects there by name and
	// nothing else.
	BYOHNamespace string
	// OperatorCondition is the OperatorCondition OLM names in
	// OPERATOR_CONDITION_NAME; "" (not installed by OLM) reports nothing
	// (upgradeable.go).
	OperatorCondition string
	// ConfigMap is the BYOH ConfigMap's name; "" turns the BYOH source off.
	ConfigMap string
	// DefaultApproval is the approval of the instances made from the BYOH
	// ConfigMap, set when each is created (an admin may change it on the
	// instance after): Manual for a cautious fleet, whose hosts then join
	// only once an admin approved each plan. "": Auto, the CRD's default.
	DefaultApproval wsuv1.Approval
	// IgnoreWMCO turns off the check that leaves the BYOH ConfigMap and
	// its instances alone while WMCO's operator runs in the BYOH namespace
	// (wmco.go): for an admin who runs both, on different ConfigMaps.
	IgnoreWMCO bool
	// MachineNamespace holds the Machine API's Machines whose Windows
	// ones become instances (machines.go); default openshift-machine-api.
	// Machines are read only where the cluster serves the kind.
	MachineNamespace string
	// MachineUsername is the account on every Windows Machine's host; "":
	// the platform's (capi on Azure, Administrator elsewhere). A Machine's
	// wsu.dev/username annotation overrides both.
	MachineUsername string
	// MaxConcurrentRuns bounds the playbook runs at once.
	MaxConcurrentRuns int
	// Vars and VarFiles are playbook variables for every run (the
	// cluster's settings: cluster_flavour, payload_dir...); an instance's
	// own vars come after them.
	Vars     []string
	VarFiles []string
	// HostVars are inventory variables for every instance's host (the
	// admin's, trusted: the agent, its path, ssh arguments); an instance's
	// spec.hostVars override the few it may set (port, user, timeouts).
	// Neither may set what the controller decides (hostvars.go): the
	// connection, the key, the known_hosts file, the host key.
	HostVars map[string]string
	// AddressHostVars are an admin's inventory variables for the host at
	// one spec.address, by address (a host_vars entry), after HostVars and
	// as trusted.
	AddressHostVars map[string]map[string]string
	// AllowedJumpHosts are the jump hosts an instance's spec.hostVars may
	// name in proxy_jump, exactly as written there ([user@]host[:port]);
	// none by default.
	AllowedJumpHosts []string
	// AllowPlaybookConfigMaps lets an instance's spec.playbook.configMap
	// name a site playbook: off by default, since such a playbook runs
	// with the controller's identity (its k8s_* tasks act as the
	// controller). Its runs read files only in its own directory and the
	// payload (setup.Options.Confine).
	AllowPlaybookConfigMaps bool
	// Kubeconfig is the cluster the playbooks' cluster tasks act on: ""
	// means the controller's own (in-cluster, or KUBECONFIG).
	Kubeconfig string
	// StateDir keeps each instance's SSH known_hosts and site playbook
	// files (an emptyDir in a pod: the host keys are pinned in status).
	StateDir string
	// DriftInterval is how often a joined instance is planned again
	// (jittered by up to a tenth).
	DriftInterval time.Duration
	// Backoff is the first retry delay after a failure, doubling up to
	// MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// NodeReadyCheck is how often a joined instance whose Node is not
	// Ready yet is looked at again though its Node did not change: a
	// safety net, as the Node's watch wakes it at once when it does.
	NodeReadyCheck time.Duration
	// MaxUnavailable bounds the instances taken out of service at once
	// (upgraded or removed), across all instances: a number, or a
	// percentage of the instances rounded down (at least 1). Default 1.
	MaxUnavailable intstr.IntOrString
	// PayloadCheck is how often a joined instance's Node version is
	// compared with the payload's (a stat of its manifest), so a payload
	// changed in place is rolled out without waiting for a drift pass.
	PayloadCheck time.Duration
	// Runner runs the playbooks; nil: by RunMode.
	Runner run.Runner
	// RunMode chooses the runner when Runner is nil: run.ModeInProcess (the
	// default) or run.ModeJob (one Kubernetes Job per run, configured by
	// Job).
	RunMode string
	// Job configures the Job runner.
	Job run.JobOptions
}

func (o *Options) defaults() {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.BYOHNamespace == "" {
		o.BYOHNamespace = o.Namespace
	}
	if o.MachineNamespace == "" {
		o.MachineNamespace = MachineNamespace
	}
	if o.MaxConcurrentRuns <= 0 {
		o.MaxConcurrentRuns = DefaultMaxRuns
	}
	if o.DriftInterval <= 0 {
		o.DriftInterval = DefaultDriftInterval
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.NodeReadyCheck <= 0 {
		o.NodeReadyCheck = DefaultNodeReadyCheck
	}
	if o.PayloadCheck <= 0 {
		o.PayloadCheck = DefaultPayloadCheck
	}
	if o.MaxUnavailable == (intstr.IntOrString{}) {
		o.MaxUnavailable = DefaultMaxUnavailable
	}
	if o.RunMode == "" {
		o.RunMode = run.ModeInProcess
	}
	if o.Runner == nil && o.RunMode == run.ModeInProcess {
		o.Runner = run.InProcess{}
	}
}

// check refuses options no controller can run with.
func (o *Options) check() error {
	if o.StateDir == "" {
		return fmt.Errorf("controller: a state directory is needed (known_hosts, site playbooks)")
	}
	if _, err := scaledMaxUnavailable(o.MaxUnavailable, 100); err != nil {
		return fmt.Errorf("controller: max unavailable: %w", err)
	}
	switch o.DefaultApproval {
	case "", wsuv1.ApprovalAuto, wsuv1.ApprovalManual:
	default:
		return fmt.Errorf("controller: default approval %q: want %s or %s", o.DefaultApproval, wsuv1.ApprovalAuto, wsuv1.ApprovalManual)
	}
	return o.checkAdminHostVars()
}

// ParseApproval reads a --default-approval value: Auto or Manual, in any
// case.
func ParseApproval(s string) (wsuv1.Approval, error) {
	for _, a := range []wsuv1.Approval{wsuv1.ApprovalAuto, wsuv1.ApprovalManual} {
		if strings.EqualFold(strings.TrimSpace(s), string(a)) {
			return a, nil
		}
	}
	return "", fmt.Errorf("%q is neither %s nor %s", s, wsuv1.ApprovalAuto, wsuv1.ApprovalManual)
}

// ParseMaxUnavailable reads a --max-unavailable value: a number ("2") or a
// percentage ("25%").
func ParseMaxUnavailable(s string) (intstr.IntOrString, error) {
	v := intstr.Parse(strings.TrimSpace(s))
	if _, err := scaledMaxUnavailable(v, 100); err != nil {
		return v, err
	}
	return v, nil
}

// scaledMaxUnavailable is v for total instances: a percentage rounds down,
// and the result is at least 1 (0 would stop every upgrade and removal).
func scaledMaxUnavailable(v intstr.IntOrString, total int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, false)
	switch {
	case err != nil:
		return 0, err
	case n < 0:
		return 0, fmt.Errorf("%s is negative", v.String())
	}
	return max(n, 1), nil
}

// runner makes the Job runner when RunMode asks for it.
func (o *Options) runner(cfg *rest.Config, scheme *runtime.Scheme) error {
	switch {
	case o.Runner != nil:
		return nil
	case o.RunMode == run.ModeJob:
		if o.Job.MaxRunning == 0 {
			o.Job.MaxRunning = o.MaxConcurrentRuns
		}
		jr, err := run.NewJobRunner(cfg, scheme, o.Job)
		if err != nil {
			return err
		}
		o.Runner = jr
		return nil
	}
	return fmt.Errorf("controller: unknown run mode %q (want %s or %s)", o.RunMode, run.ModeInProcess, run.ModeJob)
}

// Setup registers the controller's reconcilers with mgr. The manager's
// scheme must hold the core types and wsu.dev/v1alpha1 (approval.NewScheme).
func Setup(mgr ctrl.Manager, o Options) error {
	o.defaults()
	if err := o.check(); err != nil {
		return err
	}
	payloads, err := newPayloadVersions(o)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := o.runner(mgr.GetConfig(), mgr.GetScheme()); err != nil {
		return err
	}
	metrics := newMetrics()
	if err := metrics.register(ctrlmetrics.Registry); err != nil {
		return err
	}
	ir := &InstanceReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Events:   eventRecorder(mgr),
		Options:  o,
		metrics:  metrics,
		rollouts: newRolloutLimit(),
		payloads: payloads,
		schedule: newPlanSchedule(time.Now),
	}
	if ir.settings, err = newClusterSettings(mgr, o.Namespace); err != nil { // clustersettings.go
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &wsuv1.WindowsInstance{}, keySecretIndex, indexKeySecret(o.BYOHNamespace)); err != nil {
		return fmt.Errorf("controller: indexing instances by key Secret: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&wsuv1.WindowsInstance{}).
		Named("windowsinstance").
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentRuns}).
		Watches(nodeObject(), nodeToInstances(mgr.GetClient(), o.Namespace)).
		// A rollout slot freed wakes the instances waiting for one
		// (rollout.go): a Node's mark cleared, or a slot of this process
		// given back.
		Watches(nodeObject(), slotFreed(ir.rollouts)).
		WatchesRawSource(source.Channel(ir.rollouts.wake, &handler.EnqueueRequestForObject{})).
		// The global pause (pause.go).
		Watches(configMapObject(), settingsToInstances(mgr.GetClient(), o.Namespace), onlySettings(o.Namespace)).
		// The key Secrets, metadata only (keywatch.go).
		Watches(secretMetadata(), secretToInstances(mgr.GetClient()), builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
	// The cluster settings pushed to the nodes (clustersettings.go).
	b = ir.settings.watch(b, mgr.GetClient(), o.Namespace)
	if o.checksWMCO() {
		// WMCO's operator starting or stopping (wmco.go).
		b = b.Watches(wmcoDeploymentObject(), wmcoToInstances(mgr.GetClient(), o.Namespace), onlyWMCO(o.BYOHNamespace))
	}
	if _, ok := o.Runner.(*run.JobRunner); ok {
		// The runs' Jobs, metadata only: a Job's change (its completion)
		// reconciles its instance, whose pass reads the result
		// (run/jobrunner.go).
		b = b.Owns(jobMetadata(), builder.OnlyMetadata)
	}
	if err := b.Complete(ir); err != nil {
		return err
	}
	if err := setupRenewals(mgr, o, metrics); err != nil {
		return err
	}
	if err := setupUpgradeable(mgr, o); err != nil {
		return err
	}
	if err := setupUserData(mgr, o); err != nil { // userdatasecret.go
		return err
	}
	if err := setupMachines(mgr, o); err != nil { // machines.go
		return err
	}
	if o.ConfigMap == "" {
		return nil
	}
	cb := ctrl.NewControllerManagedBy(mgr).
		Named("byoh-configmap").
		For(configMapObject(), onlyConfigMap(o.BYOHNamespace, o.ConfigMap)).
		// Its instances, which have no owner reference to it in another
		// namespace: by their source label.
		Watches(&wsuv1.WindowsInstance{}, byohInstanceToConfigMap(o.BYOHNamespace, o.ConfigMap))
	if o.checksWMCO() {
		cb = cb.Watches(wmcoDeploymentObject(), wmcoToConfigMap(o.BYOHNamespace, o.ConfigMap), onlyWMCO(o.BYOHNamespace))
	}
	return cb.Complete(&ConfigMapReconciler{
		Client:            mgr.GetClient(),
		Reader:            mgr.GetAPIReader(),
		Events:            eventRecorder(mgr),
		Namespace:         o.BYOHNamespace,
		InstanceNamespace: o.Namespace,
		Name:              o.ConfigMap,
		DefaultApproval:   o.DefaultApproval,
		IgnoreWMCO:        o.IgnoreWMCO,
	})
}

// jobMetadata is a run's Job, as the metadata-only watch of the Jobs
// the instances own sees it.
func jobMetadata() client.Object {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	return m
}

// eventRecorder records core/v1 Events, which `kubectl describe` shows and
// WMCO's users read (its reasons are kept). The events.k8s.io recorder
// folds events of one reason into a series that keeps only the first
// message, which would hide all but one bad ConfigMap entry.
func eventRecorder(mgr ctrl.Manager) record.EventRecorder {
	//lint:ignore SA1019 core/v1 Events on purpose; see above.
	return mgr.GetEventRecorderFor("wsu-controller")
}

// setupRenewals registers the CSR renewal approver.
func setupRenewals(mgr ctrl.Manager, o Options, m *metrics) error {
	kc, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("csr-renewals").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
			return ok && kube.CSRKind(csr) != "" && kube.CSRState(csr) == kube.CSRPending
		}))).
		Complete(&CSRReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Kube: kc, Events: eventRecorder(mgr), Namespace: o.Namespace,
			HostVars: o.HostVars, AddressHostVars: o.AddressHostVars, metrics: m})
}
