package kubetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Option adds a part to a test cluster. Without options a cluster is
// etcd and kube-apiserver only: the fastest to start, and all most tests
// need.
type Option func(*options)

type options struct {
	controllerManager, scheduler bool
	kubeadmControllers           bool
}

// WithControllerManager runs a real kube-controller-manager beside the API
// server (built and cached on first use like it) with the controllers a
// workload needs: Job, TTL-after-finished, ReplicaSet and Deployment, the
// garbage collector, namespace lifecycle, ServiceAccounts and their
// tokens, the kube-root-ca.crt publisher, and the CSR signer with the test
// cluster's CA (so RunParts leaves signing to it and SignCSR is not
// needed). The API server then also admits pods through the
// ServiceAccount plugin, as a real cluster does.
func WithControllerManager() Option { return func(o *options) { o.controllerManager = true } }

// WithKubeadmControllers runs kube-controller-manager (it implies
// WithControllerManager) with, besides ControllerManagerControllers, the
// controllers of a kubeadm cluster that a node join and HostProcess
// DaemonSets meet (KubeadmControllers): the CSR approver (kubeadm's
// node-autoapprove bindings from InitKubeadm then take effect), the
// bootstrap signer and token cleaner, node IPAM (each Node gets a /24 of
// KubeadmPodSubnet as spec.podCIDR) and the DaemonSet controller.
func WithKubeadmControllers() Option {
	return func(o *options) { o.controllerManager, o.kubeadmControllers = true, true }
}

// The networks a cluster with WithKubeadmControllers uses, as a kubeadm
// cluster with `--pod-network-cidr=10.244.0.0/16` (Flannel's and the
// sig-windows-tools guides' value) does.
const (
	// KubeadmPodSubnet is the cluster CIDR node IPAM allocates from.
	KubeadmPodSubnet = "10.244.0.0/16"
	// KubeadmNodeCIDRMaskSize is the size of each Node's spec.podCIDR.
	KubeadmNodeCIDRMaskSize = 24
	// ServiceSubnet is the API server's service range: envtest's
	// --service-cluster-ip-range, which this package keeps.
	ServiceSubnet = "10.0.0.0/24"
	// ClusterDNSIP is the kube-dns Service's address, the 10th of
	// ServiceSubnet as kubeadm picks it.
	ClusterDNSIP = "10.0.0.10"
	// ClusterDomain is kubeadm's default DNS domain.
	ClusterDomain = "cluster.local"
)

// KubeadmControllers are the controllers WithKubeadmControllers adds to
// ControllerManagerControllers, by kube-controller-manager's names
// (`kube-controller-manager --help`, --controllers). The bootstrap signer
// and token cleaner are off by default upstream; kubeadm turns them on.
func KubeadmControllers() []string {
	return []string{
		"certificatesigningrequest-approving-controller",
		"bootstrap-signer-controller",
		"token-cleaner-controller",
		"node-ipam-controller",
		"daemonset-controller",
		// Pods bound to a Node that is gone are deleted (a removed
		// Windows node's DaemonSet pods).
		"pod-garbage-collector-controller",
	}
}

// WithScheduler runs a real kube-scheduler beside the API server: pods are
// bound to Nodes that fit them (test/podrunner registers one and runs what
// is bound to it).
func WithScheduler() Option { return func(o *options) { o.scheduler = true } }

// ControllerManagerControllers are the kube-controller-manager controllers
// WithControllerManager turns on; the others stay off.
var ControllerManagerControllers = []string{
	"job-controller",
	"ttl-after-finished-controller",
	"replicaset-controller",
	"deployment-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"certificatesigningrequest-signing-controller",
}

// binariesFor lists the binaries a cluster with o needs.
func (o options) binaries() []string {
	names := []string{Etcd, KubeAPIServer}
	if o.controllerManager {
		names = append(names, KubeControllerManager)
	}
	if o.scheduler {
		names = append(names, KubeScheduler)
	}
	return names
}

// component is a control-plane process kubetest starts itself (envtest
// starts only etcd and the API server).
type component struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set before done closes
}

// startComponents starts what opts ask for and waits until each serves
// /healthz.
func (c *Cluster) startComponents(ctx context.Context, bins map[string]string, opts options) error {
	if opts.controllerManager {
		args, err := c.controllerManagerArgs()
		if err != nil {
			return err
		}
		if err := c.startComponent(ctx, KubeControllerManager, bins[KubeControllerManager], args); err != nil {
			return err
		}
	}
	if opts.scheduler {
		args := []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false"}
		if err := c.startComponent(ctx, KubeScheduler, bins[KubeScheduler], args); err != nil {
			return err
		}
	}
	return nil
}

// controllerManagerArgs writes the CA files kube-controller-manager reads
// and returns its flags. It runs with the admin's credentials (not one
// ServiceAccount per controller): what it is allowed is not under test.
func (c *Cluster) controllerManagerArgs() ([]string, error) {
	der, err := x509.MarshalECPrivateKey(c.signer.key)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	files := map[string][]byte{
		"signer.crt":   c.signer.pem,
		"signer.key":   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		"apiserver-ca": c.Config.CAData,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
	}
	controllers := slices.Clone(ControllerManagerControllers)
	var extra []string
	if c.opts.kubeadmControllers {
		controllers = append(controllers, KubeadmControllers()...)
		extra = []string{
			"--allocate-node-cidrs=true",
			"--cluster-cidr=" + KubeadmPodSubnet,
			"--node-cidr-mask-size=" + strconv.Itoa(KubeadmNodeCIDRMaskSize),
			// node IPAM keeps the service range out of what it allocates.
			"--service-cluster-ip-range=" + ServiceSubnet,
		}
	}
	return append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--cluster-signing-cert-file=" + filepath.Join(c.dir, "signer.crt"),
		"--cluster-signing-key-file=" + filepath.Join(c.dir, "signer.key"),
		"--service-account-private-key-file=" + c.env.serviceAccountKey(),
		"--root-ca-file=" + filepath.Join(c.dir, "apiserver-ca"),
		// Finished Jobs and their pods go at once when a test asks for it.
		"--concurrent-ttl-after-finished-syncs=5",
	}, extra...), nil
}

// startComponent starts one binary on a free port of 127.0.0.1, its output
// in a log file, and waits for its /healthz.
func (c *Cluster) startComponent(ctx context.Context, name, path string, args []string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(c.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	args = append(args, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port))
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("kubetest: starting %s: %w", name, err)
	}
	comp := &component{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		comp.err = cmd.Wait()
		logFile.Close()
		close(comp.done)
	}()
	c.components = append(c.components, comp)
	start := time.Now()
	if err := waitHealthy(ctx, comp, port); err != nil {
		return fmt.Errorf("kubetest: %s did not become healthy: %w\n%s", name, err, tailFile(logPath, 30))
	}
	c.logf("kubetest: %s up in %s (log %s)", name, time.Since(start).Round(10*time.Millisecond), logPath)
	return nil
}

// freePort asks the kernel for a free port on 127.0.0.1. Another process
// could take it before the component binds it; the component then fails
// its health check and the error says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("kubetest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy polls https://127.0.0.1:port/healthz (served to anonymous
// users by both components) until it answers ok or the process exits.
func waitHealthy(ctx context.Context, comp *component, port int) error {
	client := &http.Client{
		Timeout: 2 * time.Second,
		// Its serving certificate is self-signed; nothing secret is read.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-comp.done:
			return fmt.Errorf("exited: %v", comp.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stopComponents stops them (SIGTERM, then SIGKILL after 10s) in reverse
// order of start, before the API server stops.
func (c *Cluster) stopComponents() error {
	var errs []error
	for i := len(c.components) - 1; i >= 0; i-- {
		comp := c.components[i]
		_ = comp.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-comp.done:
		case <-time.After(10 * time.Second):
			_ = comp.cmd.Process.Kill()
			<-comp.done
			errs = append(errs, fmt.Errorf("kubetest: %s did not stop on SIGTERM; killed", comp.name))
		}
	}
	c.components = nil
	return errors.Join(errs...)
}

// ComponentLog returns the tail of a component's log (KubeControllerManager
// or KubeScheduler), for a failing test to show.
func (c *Cluster) ComponentLog(name string, lines int) string {
	for _, comp := range c.components {
		if comp.name == name {
			return tailFile(comp.log, lines)
		}
	}
	return ""
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return tailLines(string(b), n)
}

// HasControllerManager reports whether kube-controller-manager runs in
// this cluster (WithControllerManager): the real CSR signer, Job, garbage
// collection and namespace controllers are then there.
func (c *Cluster) HasControllerManager() bool { return c.opts.controllerManager }
