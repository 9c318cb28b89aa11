package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	corev1 "k8s.io/api/core/v1"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// cacheNamespaces are the namespaces a ConfigMap or Secret cache watches:
// the controller's, and the BYOH namespace when it is another, there only
// the object named (a list and watch with a metadata.name field selector,
// which a Role limited to that name allows).
func (o Options) cacheNamespaces(byohName string) map[string]cache.Config {
	out := map[string]cache.Config{o.Namespace: {}}
	if o.BYOHNamespace != o.Namespace && byohName != "" {
		out[o.BYOHNamespace] = cache.Config{FieldSelector: fields.OneTermEqualSelector("metadata.name", byohName)}
	}
	return out
}

// DefaultMetricsAddr is where the metrics endpoint listens by default.
const DefaultMetricsAddr = ":8443"

// ManagerOptions are the process-level settings of `wsu controller`.
type ManagerOptions struct {
	// LeaderElection makes one of several replicas act (a Lease in
	// Options.Namespace), released on a clean exit.
	LeaderElection bool
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// MetricsAddr serves Prometheus metrics over HTTPS ("0" turns them
	// off): each request's bearer token is authenticated by a TokenReview
	// and authorized by a SubjectAccessReview (get on the non-resource URL
	// /metrics), as the API server would (controller-runtime's filters).
	MetricsAddr string
	// MetricsCertDir holds the metrics endpoint's tls.crt and tls.key;
	// "" makes a self-signed certificate at start.
	MetricsCertDir string
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
}

// Run starts the controller and blocks until ctx ends (SIGTERM): running
// playbooks see the cancelled context and stop cleanly (the agent's atomic
// writes keep hosts consistent), and a restarted controller converges from
// status.
func Run(ctx context.Context, cfg *rest.Config, o Options, m ManagerOptions) error {
	mo, err := ManagerConfig(o, m)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if err := Setup(mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// ManagerConfig is the manager Run starts: the scheme, leader election
// through a Lease in the controller's namespace (released on a clean exit,
// so a standby takes over at once), and a cache kept to that namespace.
func ManagerConfig(o Options, m ManagerOptions) (ctrl.Options, error) {
	scheme, err := approval.NewScheme()
	if err != nil {
		return ctrl.Options{}, err
	}
	o.defaults()
	if m.LeaderElectionID == "" {
		m.LeaderElectionID = "wsu-controller.wsu.dev"
	}
	return ctrl.Options{
		Scheme:                        scheme,
		LeaderElection:                m.LeaderElection,
		LeaderElectionID:              m.LeaderElectionID,
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics: metricsserver.Options{
			BindAddress: m.MetricsAddr, SecureServing: true, CertDir: m.MetricsCertDir,
			FilterProvider: filters.WithAuthenticationAndAuthorization,
		},
		HealthProbeBindAddress: m.ProbeAddr,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only the controller's namespace, and in the BYOH namespace
			// when it is another (WMCO's, on OpenShift) only the BYOH
			// ConfigMap and the key Secret, by name: least privilege and a
			// small cache. Nodes are cluster-scoped.
			&corev1.ConfigMap{}:      {Namespaces: o.cacheNamespaces(o.ConfigMap)},
			&wsuv1.WindowsInstance{}: {Namespaces: map[string]cache.Config{o.Namespace: {}}},
			// The key Secret watch caches metadata only (keywatch.go).
			secretMetadata(): {Namespaces: o.cacheNamespaces(kubeinv.KeySecret)},
			// Job mode's watch of the runs' Jobs: the controller's
			// namespace, the Jobs it labelled.
			jobMetadata(): {Namespaces: map[string]cache.Config{o.Namespace: {}}, Label: run.JobSelector()},
			// WMCO's operator Deployment, by name, in the BYOH namespace
			// (wmco.go).
			wmcoDeploymentObject(): {Namespaces: map[string]cache.Config{o.BYOHNamespace: {
				FieldSelector: fields.OneTermEqualSelector("metadata.name", WMCODeployment)}}},
		}},
		// Secrets' contents are read when a run needs its key, never
		// cached.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	}, nil
}
