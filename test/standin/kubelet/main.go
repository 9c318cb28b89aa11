// Command kubelet is a TEST STAND-IN for kubelet.exe, not a product binary
// and not a kubelet: it runs no containers and serves nothing; the only
// pods it runs are HostProcess pods it maps to other stand-ins (4). Under the
// simulated Windows host (agent/platform/sim), started by the kube-log-runner
// stand-in for the kubelet service, it takes the real kubelet's command line
// (playbooks/configure-kubelet.hcl) and does to the API server what a real
// kubelet's start does, with the real kubelet's client-go code where it
// exists (CSR request and wait, certificate store):
//
//  1. TLS bootstrap: reuse C:\k\kubeconfig while its client certificate is
//     valid and accepted; otherwise request a client certificate with the
//     bootstrap kubeconfig (CSR node-csr-<digest>, signer
//     kubernetes.io/kube-apiserver-client-kubelet, CN system:node:<name>,
//     O system:nodes), wait until it is approved and issued, and write the
//     kubeconfig (certificate embedded) and cert-dir\kubelet-client-current.pem.
//  2. Register the Node as itself (labels, registerWithTaints, addresses,
//     node info) unless it exists, and post Ready with a heartbeat and a
//     node lease.
//  3. With serverTLSBootstrap, request a serving certificate (signer
//     kubernetes.io/kubelet-serving, SANs: the node IP and host name) unless
//     cert-dir\kubelet-server-current.pem is valid, and store it.
//  4. Run the HostProcess pods bound to the node (hostprocess.go): for each
//     pod whose containers are all HostProcess and whose images the
//     stand-in maps (calico/node-windows → calicowindows, kube-proxy →
//     kubeproxy, binaries from WSU_KUBELET_HOSTPROCESS_DIR, default the
//     kubelet's own directory), write the sandbox C:\C\<pod uid> (a
//     pod-bound ServiceAccount token from TokenRequest with the cluster
//     CA and namespace at var\run\secrets\kubernetes.io\serviceaccount,
//     ConfigMap volumes at their mount paths), start one host process per
//     container with CONTAINER_SANDBOX_MOUNT_POINT, the container's env
//     (value, fieldRef, configMapKeyRef) and
//     KUBERNETES_SERVICE_HOST/PORT naming the API server's real address,
//     output in C:\var\log\pods\<ns>_<pod>_<uid>\<container>\<n>.log,
//     and report the pod Running and Ready. A process that exits makes the
//     pod not Ready (CrashLoopBackOff) and is restarted after a back-off.
//     A deleted pod's processes are stopped and the pod removed. Other
//     pods are left Pending (logged once).
//  5. On SIGTERM or SIGINT, stop those processes and exit 0.
//
// Windows paths are translated through the simulated host (WSU_SIM_ROOT).
// Flags it does not know are logged and ignored, so extra kubelet
// arguments never stop it. Environment knobs for tests:
// WSU_KUBELET_HEARTBEAT (node status/lease period, default 10s) and
// WSU_KUBELET_VERSION (the reported kubelet version).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wsu-project/wsu/test/standin/simhost"
)

const (
	envHeartbeat = "WSU_KUBELET_HEARTBEAT"
	envVersion   = "WSU_KUBELET_VERSION"
)

// options are the kubelet flags the stand-in acts on, as local paths.
type options struct {
	config, bootstrapKubeconfig, kubeconfig, certDir string
	nodeName, hostname                               string
	nodeIP                                           net.IP
	nodeLabels                                       map[string]string
	cloudProvider                                    string
	verbosity                                        int
	heartbeat                                        time.Duration
	version                                          string
	windowsBuild                                     string
	kc                                               kubeletConfig

	// providerID is the Node's spec.providerID at registration
	// (--provider-id), as the kubelet sets it.
	providerID string
}

// kubeletConfig is the part of KubeletConfiguration the stand-in uses.
type kubeletConfig struct {
	Kind               string            `yaml:"kind"`
	APIVersion         string            `yaml:"apiVersion"`
	ServerTLSBootstrap bool              `yaml:"serverTLSBootstrap"`
	RegisterWithTaints []taint           `yaml:"registerWithTaints"`
	MaxPods            int64             `yaml:"maxPods"`
	SystemReserved     map[string]string `yaml:"systemReserved"`
}

type taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// valueFlags take a value; the kubelet's boolean flags do not.
var valueFlags = map[string]bool{
	"config": true, "bootstrap-kubeconfig": true, "kubeconfig": true, "cert-dir": true,
	"hostname-override": true, "node-ip": true, "node-labels": true, "v": true,
	"cloud-provider": true, "cloud-config": true, "windows-priorityclass": true, "provider-id": true,
}

var boolFlags = map[string]bool{"windows-service": true}

// parseFlags reads the kubelet command line: --name=value, --name value
// for the flags above, -name as well as --name. Anything else is logged
// and ignored.
func parseFlags(args []string) (map[string]string, error) {
	got := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			log.Printf("ignoring argument %q: the kubelet takes no positional arguments", a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case valueFlags[name] && !hasValue:
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			value = args[i]
		case boolFlags[name] && !hasValue:
			value = "true"
		case !valueFlags[name] && !boolFlags[name]:
			log.Printf("ignoring flag %q: the stand-in does not act on it", a)
			continue
		}
		got[name] = value
	}
	return got, nil
}

func loadOptions(args []string, paths *simhost.Paths) (*options, error) {
	f, err := parseFlags(args)
	if err != nil {
		return nil, err
	}
	o := &options{nodeLabels: map[string]string{}, heartbeat: 10 * time.Second, cloudProvider: f["cloud-provider"],
		providerID:   f["provider-id"],
		windowsBuild: "10.0.20348"}
	if v, ok := f["v"]; ok {
		if o.verbosity, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("--v=%s: %w", v, err)
		}
	}
	for _, p := range []struct {
		flag string
		dst  *string
	}{{"config", &o.config}, {"bootstrap-kubeconfig", &o.bootstrapKubeconfig}, {"kubeconfig", &o.kubeconfig}, {"cert-dir", &o.certDir}} {
		v := f[p.flag]
		if v == "" {
			continue
		}
		if *p.dst, err = paths.Local(v); err != nil {
			return nil, fmt.Errorf("--%s: %w", p.flag, err)
		}
	}
	if o.kubeconfig == "" {
		return nil, errors.New("--kubeconfig is required: the stand-in only runs as a cluster node")
	}
	if o.certDir == "" {
		// The kubelet's default, relative to its root directory.
		if o.certDir, err = paths.Local(`C:\var\lib\kubelet\pki`); err != nil {
			return nil, fmt.Errorf("cert dir: %w", err)
		}
	}
	// The kubelet lower-cases the host name it registers under.
	o.hostname = strings.ToLower(strings.TrimSpace(f["hostname-override"]))
	if o.hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("no --hostname-override and no host name: %w", err)
		}
		o.hostname = strings.ToLower(h)
	}
	o.nodeName = o.hostname
	switch ip := f["node-ip"]; {
	case ip != "":
		if o.nodeIP = net.ParseIP(ip); o.nodeIP == nil {
			return nil, fmt.Errorf("--node-ip=%s is not an IP address", ip)
		}
	case paths.Host != nil:
		facts, err := paths.Host.Facts(context.Background())
		if err != nil {
			return nil, err
		}
		o.nodeIP = net.ParseIP(facts.IPv4)
	}
	if o.nodeIP == nil {
		return nil, errors.New("no --node-ip, and no simulated host to take the address from")
	}
	if paths.Host != nil {
		if facts, err := paths.Host.Facts(context.Background()); err == nil && facts.Version != "" {
			o.windowsBuild = facts.Version
		}
	}
	if l := f["node-labels"]; l != "" {
		for _, kv := range strings.Split(l, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--node-labels: %q is not key=value", kv)
			}
			o.nodeLabels[k] = v
		}
	}
	if o.config != "" {
		b, err := os.ReadFile(o.config)
		if err != nil {
			return nil, fmt.Errorf("failed to load kubelet config file %s: %w", f["config"], err)
		}
		if err := yaml.Unmarshal(b, &o.kc); err != nil {
			return nil, fmt.Errorf("kubelet config file %s: %w", f["config"], err)
		}
		if o.kc.Kind != "KubeletConfiguration" || !strings.HasPrefix(o.kc.APIVersion, "kubelet.config.k8s.io/") {
			return nil, fmt.Errorf("kubelet config file %s: kind %q, apiVersion %q is not a KubeletConfiguration", f["config"], o.kc.Kind, o.kc.APIVersion)
		}
	}
	if o.kc.MaxPods == 0 {
		o.kc.MaxPods = 110
	}
	if s := os.Getenv(envHeartbeat); s != "" {
		if o.heartbeat, err = time.ParseDuration(s); err != nil || o.heartbeat <= 0 {
			return nil, fmt.Errorf("%s=%s is not a positive duration", envHeartbeat, s)
		}
	}
	o.version = os.Getenv(envVersion)
	if o.version == "" {
		o.version = defaultVersion()
	}
	return o, nil
}

// defaultVersion is the Kubernetes version of the client-go it is built
// with (v0.X.Y is Kubernetes v1.X.Y), marked as the stand-in's.
func defaultVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" && strings.HasPrefix(d.Version, "v0.") {
				return "v1." + strings.TrimPrefix(d.Version, "v0.") + "-wsu-standin"
			}
		}
	}
	return "v0.0.0-wsu-standin"
}

func main() {
	log.SetPrefix("kubelet (stand-in): ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:])
	switch {
	case ctx.Err() != nil:
		log.Print("got a stop signal: exiting")
	case err != nil:
		log.Printf("fatal: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	paths, err := simhost.Open()
	if err != nil {
		return err
	}
	o, err := loadOptions(args, paths)
	if err != nil {
		return err
	}
	log.Printf("node %s, IP %s, version %s, kubeconfig %s, cert dir %s", o.nodeName, o.nodeIP, o.version, o.kubeconfig, o.certDir)
	if err := os.MkdirAll(o.certDir, 0o755); err != nil {
		return fmt.Errorf("cert dir: %w", err)
	}
	cs, err := clientCertificate(ctx, o)
	if err != nil {
		return err
	}
	if err := register(ctx, cs, o); err != nil {
		return err
	}
	if o.kc.ServerTLSBootstrap {
		go servingCertificate(ctx, cs, o)
	} else {
		log.Print("serverTLSBootstrap is off: a real kubelet would serve with a self-signed certificate; the stand-in serves nothing")
	}
	runner, err := newPodRunner(cs, o, paths)
	if err != nil {
		return err
	}
	podsDone := make(chan struct{})
	go func() { defer close(podsDone); runner.run(ctx) }()
	heartbeat(ctx, cs, o)
	<-podsDone
	return nil
}
