package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/version"
)

func (a *app) controllerCommand() *cobra.Command {
	o := controller.Options{}
	m := controller.ManagerOptions{}
	var hostVars, addressHostVars []string
	var kubeconfig, kubeContext, maxUnavailable, jobTemplate, defaultApproval string
	var wmcoCheck bool
	cmd := &cobra.Command{
		Use:           "wsu-controller",
		Short:         "Keep WindowsInstances joined to the cluster (the in-cluster face)",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Long: `Controller watches WindowsInstances (wsu.dev/v1alpha1) in its namespace and the BYOH
windows-instances ConfigMap (there, or in --byoh-namespace) and joins, corrects and removes their hosts with the
same playbooks as 'wsu apply' ('wsu controller' runs this program): every change is planned first, its hash and counts
recorded in the instance's status, and applied at once (approval: Auto) or once
an admin approved that hash (approval: Manual). docs/controller.md has the API,
the workflows and a troubleshooting table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vars, err := parseHostVars(hostVars)
			if err != nil {
				return err
			}
			o.HostVars = vars
			if o.AddressHostVars, err = parseAddressHostVars(addressHostVars); err != nil {
				return err
			}
			if o.MaxUnavailable, err = controller.ParseMaxUnavailable(maxUnavailable); err != nil {
				return fmt.Errorf("--max-unavailable %q: %w", maxUnavailable, err)
			}
			if o.DefaultApproval, err = controller.ParseApproval(defaultApproval); err != nil {
				return fmt.Errorf("--default-approval: %w", err)
			}
			o.Kubeconfig = kubeconfig
			o.IgnoreWMCO = !wmcoCheck
			// Installed by OLM: report Upgradeable (controller/upgradeable.go).
			o.OperatorCondition = os.Getenv(controller.OperatorConditionNameEnv)
			switch o.RunMode {
			case run.ModeInProcess:
				o.Runner = run.InProcess{Agents: a.agentSource(), Sources: setup.NewSourceHashes()}
			case run.ModeJob:
				if o.Job.Template, err = readPodTemplate(jobTemplate); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--run-mode %q: want %s or %s", o.RunMode, run.ModeInProcess, run.ModeJob)
			}
			if o.StateDir == "" {
				o.StateDir = filepath.Join(os.TempDir(), "wsu-controller")
			}
			ctrllog.SetLogger(a.controllerLogger())
			cfg, err := kube.Load(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			return controller.Run(cmd.Context(), cfg, o, m)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to manage (default: in-cluster, KUBECONFIG, ~/.kube/config); also what the playbooks' cluster tasks use")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context")
	f.StringVarP(&o.Namespace, "namespace", "n", controller.DefaultNamespace, "namespace of the WindowsInstances (and of the BYOH ConfigMap and key Secret unless --byoh-namespace)")
	f.StringVar(&o.BYOHNamespace, "byoh-namespace", "", "namespace of the BYOH ConfigMap and the default key Secret (cloud-private-key), read there by name only (default: --namespace; on OpenShift WMCO's, openshift-windows-machine-config-operator)")
	f.StringVar(&o.ConfigMap, "configmap", controller.DefaultConfigMap, "BYOH ConfigMap to turn into WindowsInstances (\"\" to turn it off)")
	f.StringVar(&defaultApproval, "default-approval", string(wsuv1.ApprovalAuto), "approval of the WindowsInstances made from the BYOH ConfigMap, set when each is created: Auto, or Manual (each plan applied only once an admin approved its hash)")
	f.BoolVar(&wmcoCheck, "wmco-check", true, "leave the BYOH ConfigMap and its instances alone while WMCO's operator (Deployment windows-machine-config-operator in the BYOH namespace) runs: false only when WMCO and wsu use different ConfigMaps")
	f.StringVar(&o.MachineNamespace, "machine-namespace", controller.MachineNamespace, "namespace of the Machine API's Machines whose Windows ones (label machine.openshift.io/os-id=Windows) become WindowsInstances; read only where the cluster serves machine.openshift.io Machines")
	f.StringVar(&o.MachineUsername, "machine-username", "", "account wsu logs in as on every Windows Machine's host (default: the platform's, capi on Azure and Administrator elsewhere, as WMCO); a Machine's wsu.dev/username annotation overrides it")
	f.IntVar(&o.MaxConcurrentRuns, "max-concurrent-runs", controller.DefaultMaxRuns, "playbook runs at once")
	f.StringVar(&maxUnavailable, "max-unavailable", controller.DefaultMaxUnavailable.String(), "instances out of service at once for upgrades and removals, across all instances: a number or a percentage (\"25%\")")
	f.DurationVar(&o.PayloadCheck, "payload-check", controller.DefaultPayloadCheck, "how often joined nodes' versions are compared with the payload's (a payload changed in place is rolled out)")
	f.StringArrayVar(&o.Vars, "var", nil, "a playbook variable for every run: -var 'name=value' (repeatable)")
	f.StringArrayVar(&o.VarFiles, "var-file", nil, "a var file for every run (repeatable)")
	f.StringArrayVar(&hostVars, "host-var", nil, "an inventory variable for every host: --host-var ansible_port=2222 (repeatable)")
	f.StringArrayVar(&addressHostVars, "address-host-var", nil, "an inventory variable for the host at one instance address: --address-host-var 10.0.0.11:wsu_agent_path='C:\\k\\wsu.exe' (repeatable)")
	f.BoolVar(&o.AllowPlaybookConfigMaps, "allow-playbook-configmaps", false, "let WindowsInstances run site playbooks from ConfigMaps (spec.playbook.configMap); such a playbook acts on the cluster with the controller's rights, so whoever may write ConfigMaps in the namespace gets them (default off)")
	f.StringSliceVar(&o.AllowedJumpHosts, "allowed-jump-hosts", nil, "jump hosts an instance's spec.hostVars.proxy_jump may name, exactly as written there: [user@]host[:port] (comma-separated or repeated; default none)")
	f.StringVar(&o.StateDir, "state-dir", "", "directory for known_hosts and site playbooks (default: a temp directory)")
	f.DurationVar(&o.DriftInterval, "drift-interval", controller.DefaultDriftInterval, "how often joined instances are planned again")
	f.DurationVar(&o.Backoff, "retry-backoff", controller.DefaultBackoff, "first retry delay after a failed run (doubles each time)")
	f.DurationVar(&o.MaxBackoff, "max-retry-backoff", controller.DefaultMaxBackoff, "longest retry delay")
	f.DurationVar(&o.NodeReadyCheck, "node-ready-check", controller.DefaultNodeReadyCheck, "how often a joined instance whose Node is not Ready is looked at again though the Node did not change (a safety net: a Node change wakes it at once)")
	f.BoolVar(&m.LeaderElection, "leader-elect", false, "elect a leader through a Lease, so only one replica acts")
	f.StringVar(&m.LeaderElectionID, "leader-election-id", "", "name of the leader election Lease")
	f.StringVar(&m.MetricsAddr, "metrics-bind-address", controller.DefaultMetricsAddr, "address of the Prometheus metrics endpoint, HTTPS, authenticated and authorized by the API server (\"0\" turns it off)")
	f.StringVar(&m.MetricsCertDir, "metrics-cert-dir", "", "directory of the metrics endpoint's tls.crt and tls.key (default: a self-signed certificate made at start)")
	f.StringVar(&m.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&o.RunMode, "run-mode", run.ModeInProcess, "where playbooks run: in-process, or job (one Kubernetes Job per run, from --job-image)")
	f.StringVar(&o.Job.Image, "job-image", "", "the wsu image the Jobs run (--run-mode=job)")
	f.StringVar(&o.Job.ServiceAccount, "job-service-account", run.DefaultJobServiceAccount, "the ServiceAccount the Jobs run as (never the namespace's \"default\")")
	f.DurationVar(&o.Job.ActiveDeadline, "job-active-deadline", run.DefaultJobActiveDeadline, "how long a Job's run may take before the Job controller stops it (activeDeadlineSeconds)")
	f.StringVar(&jobTemplate, "job-template", "", "a YAML PodTemplateSpec the Jobs' pods start from: payload volumes and init containers, node selector, resources")
	f.DurationVar(&o.Job.TTL, "job-ttl", run.DefaultJobTTL, "how long a finished Job is kept (ttlSecondsAfterFinished)")
	cmd.AddCommand(a.runJobCommand())
	return cmd
}

// readPodTemplate reads --job-template ("" is none).
func readPodTemplate(path string) (*corev1.PodTemplateSpec, error) {
	if path == "" {
		return nil, nil
	}
	data, err := limits.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t := &corev1.PodTemplateSpec{}
	if err := yaml.UnmarshalStrict(data, t); err != nil {
		return nil, fmt.Errorf("--job-template %s: %w", path, err)
	}
	return t, nil
}

// runJobCommand is what a Job's pod runs in --run-mode=job: one run, as the
// controller asked for it, its result written as the termination message.
func (a *app) runJobCommand() *cobra.Command {
	o := run.JobPodOptions{}
	cmd := &cobra.Command{
		Use:    "run-job",
		Short:  "Run one playbook run a controller in Job mode asked for (inside its Job)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Agents = a.agentSource()
			out, err := run.JobPod(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "run result: %d task(s) changed, plan %s\n", out.Changed, out.Hash)
			if out.Failed {
				return fmt.Errorf("the run failed: %s", out.Message)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Request, "request", "", "the run request file (the Job's request annotation, mounted through the downward API)")
	f.StringVar(&o.KeyFile, "key-file", "", "the instance's private key (its key Secret, mounted)")
	f.StringVar(&o.ResultFile, "result-file", corev1.TerminationMessagePathDefault, "where the result goes (the termination message)")
	_ = cmd.MarkFlagRequired("request")
	_ = cmd.MarkFlagRequired("key-file")
	return cmd
}

// controllerLogger logs JSON to stderr, as controllers do in a pod.
func (a *app) controllerLogger() logr.Logger {
	return zap.New(zap.WriteTo(a.stderr), zap.UseDevMode(false))
}

// parseHostVars reads --host-var NAME=VALUE options.
func parseHostVars(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--host-var %q: want NAME=VALUE", kv)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// parseAddressHostVars reads --address-host-var ADDRESS:NAME=VALUE options
// (an address has no ':', a BYOH key being an IPv4 address or DNS name).
func parseAddressHostVars(list []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, s := range list {
		addr, kv, ok := strings.Cut(s, ":")
		k, v, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || strings.TrimSpace(addr) == "" || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--address-host-var %q: want ADDRESS:NAME=VALUE", s)
		}
		addr = strings.TrimSpace(addr)
		if out[addr] == nil {
			out[addr] = map[string]string{}
		}
		out[addr][strings.TrimSpace(k)] = v
	}
	return out, nil
}
