// Command hybridoverlay is a TEST STAND-IN, not a product binary: it plays
// OVN-Kubernetes' hybrid-overlay-node.exe on the simulated Windows host
// (agent/platform/sim), doing visibly what the real one does that a join
// depends on, and nothing else:
//
//  1. get its own per-node identity, as the real one with
//     --bootstrap-kubeconfig and --cert-dir: with the bootstrap kubeconfig
//     (the kubelet's C:\k\kubeconfig, so the CSR comes from
//     system:node:<node>) it requests, through client-go's certificate
//     manager as upstream does, a client certificate with its own key for
//     CN system:ovn-node:<node>, O system:ovn-nodes, signer
//     kubernetes.io/kube-apiserver-client, usages digital signature and
//     client auth, expirationSeconds from --cert-duration; waits for the
//     cluster to approve and sign it; keeps it as ovnkube-client-current.pem
//     in --cert-dir (a restart reuses a valid one); from then on talks to
//     --k8s-apiserver as system:ovn-node:<node>, verifying the server with
//     --k8s-cacert;
//  2. wait for the Node annotation k8s.ovn.org/hybrid-overlay-node-subnet,
//     which the OVN-Kubernetes master sets;
//  3. after WSU_STANDIN_NETWORK_DELAY (default 1s; the real one reconfigures
//     the host's network here, which is when tests cut the connection)
//     create the HNS networks BaseOVNKubernetesHybridOverlayNetwork
//     (100.64.0.0/30, as upstream) and OVNKubernetesHybridOverlayNetwork
//     (the node subnet), both type Overlay with the node's IP as management
//     IP, unless they already exist with those subnets;
//  4. set k8s.ovn.org/hybrid-overlay-distributed-router-gateway-mac;
//  5. run until SIGTERM or SIGINT and exit 0.
//
// Its arguments are the service's in playbooks/hybrid-overlay.hcl (WMCO's):
//
//	--node NAME --bootstrap-kubeconfig=C:\k\kubeconfig --cert-dir=C:\k\cni\config
//	--cert-duration=24h --windows-service --logfile C:\var\log\hybrid-overlay\hybrid-overlay.log
//	--k8s-apiserver=URL --k8s-cacert C:\k\bootstrap-ca.crt [--hybrid-overlay-vxlan-port N]
//
// Limits: the older --k8s-kubeconfig form is not taken; the certificate is
// renewed by the certificate manager while it runs, but the real one's exit
// on an expired certificate is not played. Windows paths go through the
// simulation named by WSU_SIM_ROOT. A restart finds its networks and
// creates no duplicates; a kubeconfig, certificate, annotation or network
// that cannot be had yet (no kubeconfig, CSR not approved, no Node, API
// server away) is waited for, as the real service is restarted by the SCM
// until it works.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
)

// The names and annotations OVN-Kubernetes and WMCO use.
const (
	subnetAnnotation     = "k8s.ovn.org/hybrid-overlay-node-subnet"
	gatewayMACAnnotation = "k8s.ovn.org/hybrid-overlay-distributed-router-gateway-mac"
	baseNetwork          = "BaseOVNKubernetesHybridOverlayNetwork"
	overlayNetwork       = "OVNKubernetesHybridOverlayNetwork"
	// baseSubnet is upstream's unused subnet for the persistent base network.
	baseSubnet = "100.64.0.0/30"
	// envNetworkDelay is how long the network "reconfiguration" takes.
	envNetworkDelay = "WSU_STANDIN_NETWORK_DELAY"
	// fallbackIP is the simulated host's default address, for a Node that
	// reports no InternalIP.
	fallbackIP = "127.0.0.1"
)

const poll = 250 * time.Millisecond

type config struct {
	node, bootstrapKubeconfig, certDir, apiServer, caCert, logfile string
	certDuration                                                   time.Duration
	vxlanPort                                                      uint
	delay                                                          time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

// logger writes timestamped lines to stdout (the simulation's service log)
// and the --logfile.
type logger struct{ w io.Writer }

func (l *logger) printf(format string, a ...any) {
	fmt.Fprintf(l.w, "%s hybrid-overlay-node (TEST STAND-IN): %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, a...))
}

func run(ctx context.Context, args []string) int {
	log := &logger{w: os.Stdout}
	cfg, err := parseArgs(args)
	if err != nil {
		log.printf("error: %v", err)
		return 2
	}
	root := os.Getenv(sim.EnvRoot)
	if root == "" {
		log.printf("error: %s is not set: this stand-in runs only as a service of the simulated Windows host", sim.EnvRoot)
		return 2
	}
	h, err := sim.New(root, sim.Options{})
	if err != nil {
		log.printf("error: %v", err)
		return 1
	}
	if cfg.logfile != "" {
		lp, err := h.LocalPath(cfg.logfile)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(lp), 0o755) // as its log library does
		}
		var f *os.File
		if err == nil {
			f, err = os.OpenFile(lp, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		}
		if err != nil {
			log.printf("error: --logfile %s: %v", cfg.logfile, err)
			return 1
		}
		defer f.Close()
		log.w = io.MultiWriter(os.Stdout, f)
	}
	log.printf("starting: pid %d, argv %q", os.Getpid(), args)
	err = serve(ctx, h, cfg, log)
	if ctx.Err() != nil {
		log.printf("stopping on signal")
		return 0
	}
	log.printf("error: %v", err)
	return 1
}

func parseArgs(args []string) (config, error) {
	var cfg config
	fset := flag.NewFlagSet("hybrid-overlay-node", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.StringVar(&cfg.node, "node", "", "the Node this host is")
	fset.StringVar(&cfg.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig the certificate is requested with (Windows path)")
	fset.StringVar(&cfg.certDir, "cert-dir", "", "directory of the node's client certificate (Windows path)")
	fset.DurationVar(&cfg.certDuration, "cert-duration", 10*time.Minute, "requested certificate lifetime")
	fset.StringVar(&cfg.apiServer, "k8s-apiserver", "", "API server URL")
	fset.StringVar(&cfg.caCert, "k8s-cacert", "", "CA bundle verifying the API server (Windows path)")
	fset.StringVar(&cfg.logfile, "logfile", "", "log file (Windows path)")
	fset.UintVar(&cfg.vxlanPort, "hybrid-overlay-vxlan-port", 4789, "VXLAN UDP port")
	fset.Bool("windows-service", false, "run as a Windows service")
	fset.Int("loglevel", 4, "log verbosity")
	if err := fset.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fset.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments %q", fset.Args())
	case cfg.node == "":
		return cfg, errors.New("--node is required")
	case cfg.bootstrapKubeconfig == "" || cfg.certDir == "":
		return cfg, errors.New("--bootstrap-kubeconfig and --cert-dir are required (this stand-in takes only the per-node identity form)")
	case !strings.HasPrefix(cfg.apiServer, "https://") || cfg.caCert == "":
		return cfg, errors.New("--k8s-apiserver (https) and --k8s-cacert are required")
	case cfg.vxlanPort > 65535: // upstream's own check
		return cfg, fmt.Errorf("the hybrid overlay VXLAN port cannot be greater than 65535. Current value: %d", cfg.vxlanPort)
	}
	cfg.delay = time.Second
	if s := os.Getenv(envNetworkDelay); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", envNetworkDelay, err)
		}
		cfg.delay = d
	}
	return cfg, nil
}

// serve does the stand-in's work and then waits for ctx; it returns only
// on ctx's end or an error no retry can fix.
func serve(ctx context.Context, h *sim.Host, cfg config, log *logger) error {
	client, err := connect(ctx, h, cfg, log)
	if err != nil {
		return err
	}
	node, subnet, err := waitSubnet(ctx, client, cfg.node, log)
	if err != nil {
		return err
	}
	mgmt := managementIP(node)
	if err := ensureNetworks(ctx, h, subnet, mgmt, cfg, log); err != nil {
		return err
	}
	mac := gatewayMAC(subnet)
	if err := annotate(ctx, client, cfg.node, mac, log); err != nil {
		return err
	}
	log.printf("ready: node %s subnet %s management IP %s gateway MAC %s (VXLAN port %d)", cfg.node, subnet, mgmt, mac, cfg.vxlanPort)
	<-ctx.Done()
	return ctx.Err()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitSubnet waits for the OVN-Kubernetes master's subnet annotation.
func waitSubnet(ctx context.Context, c kubernetes.Interface, name string, log *logger) (*corev1.Node, netip.Prefix, error) {
	var last string
	for {
		var why string
		n, err := getNode(ctx, c, name)
		switch {
		case err != nil:
			why = err.Error()
		case n.Annotations[subnetAnnotation] == "":
			why = "no " + subnetAnnotation + " annotation yet"
		default:
			p, err := netip.ParsePrefix(n.Annotations[subnetAnnotation])
			if err == nil && p.Addr().Is4() {
				return n, p.Masked(), nil
			}
			why = fmt.Sprintf("annotation %s=%q is not an IPv4 subnet", subnetAnnotation, n.Annotations[subnetAnnotation])
		}
		if why != last {
			log.printf("waiting for node %s: %s", name, why)
			last = why
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, netip.Prefix{}, err
		}
	}
}

func getNode(ctx context.Context, c kubernetes.Interface, name string) (*corev1.Node, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.CoreV1().Nodes().Get(rctx, name, metav1.GetOptions{})
}

// managementIP is the host's address on the network, as HNS reports it
// (the CNI config's ProviderAddress): the Node's InternalIP.
func managementIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && err == nil && ip.Is4() {
			return ip.String()
		}
	}
	return fallbackIP
}

// ensureNetworks creates the two networks unless they exist with the
// right subnets; one with another subnet is replaced, as upstream does.
func ensureNetworks(ctx context.Context, h *sim.Host, subnet netip.Prefix, mgmt string, cfg config, log *logger) error {
	want := []host.HNSNetwork{
		{Name: baseNetwork, Type: "Overlay", ManagementIP: mgmt, Subnets: []string{baseSubnet}},
		{Name: overlayNetwork, Type: "Overlay", ManagementIP: mgmt, Subnets: []string{subnet.String()}},
	}
	have, err := h.HNSNetworks(ctx)
	if err != nil {
		return err
	}
	var missing []host.HNSNetwork
	for _, w := range want {
		found := false
		for _, n := range have {
			if n.Name != w.Name {
				continue
			}
			if len(n.Subnets) > 0 && n.Subnets[0] == w.Subnets[0] {
				log.printf("reusing HNS network %s (%s, %s)", n.Name, n.ID, n.Subnets[0])
				found = true
			} else {
				log.printf("HNS network %s (%s) has subnets %v, want %s: replacing it", n.Name, n.ID, n.Subnets, w.Subnets[0])
				if err := h.RemoveHNSNetwork(n.Name); err != nil {
					return err
				}
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	log.printf("reconfiguring the host network for %s (takes %s; connections may drop)", subnet, cfg.delay)
	if err := sleep(ctx, cfg.delay); err != nil {
		return err
	}
	for _, w := range missing {
		err := h.AddHNSNetwork(w)
		switch {
		case errors.Is(err, fs.ErrExist):
			log.printf("HNS network %s appeared meanwhile; keeping it", w.Name)
		case err != nil:
			return err
		default:
			log.printf("created HNS network %s: type %s, subnet %s, management IP %s", w.Name, w.Type, w.Subnets[0], w.ManagementIP)
		}
	}
	return nil
}

// gatewayMAC is the distributed router's MAC. HNS assigns one per network
// from Hyper-V's OUI; here it follows from the subnet so a restart gives
// the same one.
func gatewayMAC(subnet netip.Prefix) string {
	b := subnet.Addr().Next().As4() // the gateway, .1, as upstream
	return fmt.Sprintf("00-15-5D-%02X-%02X-%02X", b[1], b[2], b[3])
}

// annotate sets the gateway MAC annotation, retrying while the API server
// cannot be reached.
func annotate(ctx context.Context, c kubernetes.Interface, name, mac string, log *logger) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gatewayMACAnnotation, mac)
	var last string
	for {
		n, err := getNode(ctx, c, name)
		if err == nil && n.Annotations[gatewayMACAnnotation] == mac {
			return nil
		}
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = c.CoreV1().Nodes().Patch(rctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			cancel()
			if err == nil {
				log.printf("annotated node %s %s=%s", name, gatewayMACAnnotation, mac)
				return nil
			}
		}
		if msg := err.Error(); msg != last {
			log.printf("retrying the annotation of node %s: %v", name, err)
			last = msg
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}

// loadKubeconfig reads a kubeconfig whose file references, if any, are
// Windows paths on the simulated host.
func loadKubeconfig(h *sim.Host, path string) (*rest.Config, error) {
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	fix := func(p *string) error {
		if len(*p) < 2 || (*p)[1] != ':' {
			return nil
		}
		lp, err := h.LocalPath(*p)
		*p = lp
		return err
	}
	for _, c := range raw.Clusters {
		if err := fix(&c.CertificateAuthority); err != nil {
			return nil, err
		}
	}
	for _, a := range raw.AuthInfos {
		if err := fix(&a.ClientCertificate); err != nil {
			return nil, err
		}
		if err := fix(&a.ClientKey); err != nil {
			return nil, err
		}
	}
	return clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
}
