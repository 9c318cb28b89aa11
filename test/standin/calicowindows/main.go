// Command calicowindows is a TEST STAND-IN, not a product binary: it plays
// the calico-node-windows HostProcess pod (Tigera operator, VXLAN) on the
// simulated Windows host (agent/platform/sim), started by the kubelet
// stand-in for a pod of that image. It does what the cluster and the node
// can observe of the real one, and nothing else:
//
//  1. as its ServiceAccount, in-cluster (KUBERNETES_SERVICE_HOST/PORT, the
//     token and CA under $CONTAINER_SANDBOX_MOUNT_POINT; see
//     test/standin/incluster), read its Node's spec.podCIDR (node name from
//     NODE_NAME, else NODENAME), waiting until node IPAM has set it;
//  2. create the HNS network Calico, type Overlay, on that subnet with the
//     Node's InternalIP as management IP, and the host endpoint Calico_ep
//     on it, unless they exist (a network on another subnet is replaced);
//  3. do install-cni's work: write calico.exe and calico-ipam.exe (marker
//     files, not programs) into CNI_BIN_DIR (default C:\opt\cni\bin) and
//     10-calico.conflist (CNI_CONF_NAME) into CNI_NET_DIR (default
//     C:\etc\cni\net.d);
//  4. print "ready: ..." and run until SIGTERM or SIGINT, then exit 0.
//
// Limits: no Calico IPAM (the Node's podCIDR is the whole block), no BGP,
// no felix policy, no Calico CRDs; no Linux side. Anything it cannot have
// yet (no Node, no podCIDR, HNS unavailable, API server away) is waited
// for and logged; a refusal by the API server (401/403) is an error and
// it exits 1, as the real pod would crash-loop.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/test/standin/incluster"
	"github.com/wsu-project/wsu/test/standin/simhost"
)

// The names calico-node-windows uses on the host.
const (
	networkName  = "Calico"
	endpointName = "Calico_ep"
	// fallbackIP is the simulated host's default address, for a Node
	// without an InternalIP.
	fallbackIP = "127.0.0.1"
	poll       = 250 * time.Millisecond
)

type config struct {
	node, binDir, netDir, conflist string
	vni                            string
}

func main() {
	log.SetPrefix("calico-node-windows (TEST STAND-IN): ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := run(ctx)
	switch {
	case ctx.Err() != nil:
		log.Print("stopping on signal")
	case err != nil:
		log.Printf("fatal: %v", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context) error {
	paths, err := simhost.Open()
	if err != nil {
		return err
	}
	if paths.Host == nil {
		return fmt.Errorf("%s is not set: this stand-in runs only on the simulated Windows host", sim.EnvRoot)
	}
	cfg := config{
		node:     env("NODE_NAME", os.Getenv("NODENAME")),
		binDir:   env("CNI_BIN_DIR", `C:\opt\cni\bin`),
		netDir:   env("CNI_NET_DIR", `C:\etc\cni\net.d`),
		conflist: env("CNI_CONF_NAME", "10-calico.conflist"),
		vni:      env("VXLAN_VNI", "4096"),
	}
	if cfg.node == "" {
		return errors.New("NODE_NAME is not set")
	}
	rc, err := incluster.Config(paths)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	node, subnet, err := waitPodCIDR(ctx, cs, cfg.node)
	if err != nil {
		return err
	}
	ep, err := ensureNetwork(ctx, paths.Host, subnet, managementIP(node))
	if err != nil {
		return err
	}
	if err := installCNI(paths, cfg, subnet); err != nil {
		return err
	}
	log.Printf("ready: node %s podCIDR %s, HNS network %s (Overlay), endpoint %s %s, CNI in %s and %s",
		cfg.node, subnet, networkName, endpointName, ep.IP, cfg.binDir, cfg.netDir)
	<-ctx.Done()
	return nil
}

// waitPodCIDR waits for node IPAM's spec.podCIDR; a refusal is fatal.
func waitPodCIDR(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, netip.Prefix, error) {
	var last string
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := cs.CoreV1().Nodes().Get(rctx, name, metav1.GetOptions{})
		cancel()
		var why string
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return nil, netip.Prefix{}, fmt.Errorf("reading node %s: %w", name, err)
		case err != nil:
			why = err.Error()
		case n.Spec.PodCIDR == "":
			why = "no spec.podCIDR yet"
		default:
			p, err := netip.ParsePrefix(n.Spec.PodCIDR)
			if err == nil && p.Addr().Is4() {
				return n, p.Masked(), nil
			}
			why = fmt.Sprintf("spec.podCIDR %q is not an IPv4 subnet", n.Spec.PodCIDR)
		}
		if why != last {
			log.Printf("waiting for node %s: %s", name, why)
			last = why
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, netip.Prefix{}, err
		}
	}
}

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

func managementIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && err == nil && ip.Is4() {
			return ip.String()
		}
	}
	return fallbackIP
}

// ensureNetwork makes the Calico network and its host endpoint exist,
// waiting while HNS is unavailable (the Containers feature not enabled).
func ensureNetwork(ctx context.Context, h *sim.Host, subnet netip.Prefix, mgmt string) (host.HNSEndpoint, error) {
	var last string
	for {
		ep, err := tryNetwork(ctx, h, subnet, mgmt)
		if err == nil {
			return ep, nil
		}
		if !errors.Is(err, sim.ErrHNSUnavailable) {
			return host.HNSEndpoint{}, err
		}
		if msg := err.Error(); msg != last {
			log.Printf("waiting for HNS: %v", err)
			last = msg
		}
		if err := sleep(ctx, poll); err != nil {
			return host.HNSEndpoint{}, err
		}
	}
}

func tryNetwork(ctx context.Context, h *sim.Host, subnet netip.Prefix, mgmt string) (host.HNSEndpoint, error) {
	nets, err := h.HNSNetworks(ctx)
	if err != nil {
		return host.HNSEndpoint{}, err
	}
	found := false
	for _, n := range nets {
		if n.Name != networkName {
			continue
		}
		if len(n.Subnets) > 0 && n.Subnets[0] == subnet.String() {
			found = true
			continue
		}
		log.Printf("HNS network %s has subnets %v, want %s: replacing it", n.Name, n.Subnets, subnet)
		if err := h.RemoveHNSNetwork(n.Name); err != nil {
			return host.HNSEndpoint{}, err
		}
	}
	if !found {
		err := h.AddHNSNetwork(host.HNSNetwork{Name: networkName, Type: "Overlay", ManagementIP: mgmt, Subnets: []string{subnet.String()}})
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return host.HNSEndpoint{}, err
		}
		log.Printf("created HNS network %s: type Overlay, subnet %s, management IP %s", networkName, subnet, mgmt)
	}
	eps, err := h.HNSEndpoints(ctx)
	if err != nil {
		return host.HNSEndpoint{}, err
	}
	for _, ep := range eps {
		if ep.Name == endpointName && ep.Network == networkName {
			return ep, nil
		}
	}
	ep, err := h.HNSCreateEndpoint(ctx, host.HNSEndpoint{Name: endpointName, Network: networkName, HostAttach: true})
	if err == nil {
		log.Printf("created HNS endpoint %s on %s: %s", endpointName, networkName, ep.IP)
	}
	return ep, err
}

// installCNI writes what the install-cni init container does.
func installCNI(paths *simhost.Paths, cfg config, subnet netip.Prefix) error {
	files := map[string][]byte{}
	for _, exe := range []string{"calico.exe", "calico-ipam.exe"} {
		files[cfg.binDir+`\`+exe] = []byte("TEST STAND-IN: not " + exe + "; written by the calicowindows stand-in\n")
	}
	conf, err := conflist(cfg, subnet)
	if err != nil {
		return err
	}
	files[cfg.netDir+`\`+cfg.conflist] = conf
	for p, data := range files {
		lp, err := paths.Local(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(lp, data, 0o644); err != nil {
			return err
		}
		log.Printf("wrote %s", p)
	}
	return nil
}

// conflist is Calico's Windows CNI config for VXLAN (the operator's
// template, abridged to the fields that locate and configure the plugin).
func conflist(cfg config, subnet netip.Prefix) ([]byte, error) {
	dns := map[string]any{"Nameservers": []string{env("KUBERNETES_DNS_SERVERS", "10.96.0.10")},
		"Search": []string{"svc.cluster.local"}}
	plugin := map[string]any{
		"type": "calico", "mode": "vxlan", "vxlan_mac_prefix": "0E-2A", "vxlan_vni": cfg.vni,
		"policy": map[string]any{"type": "k8s"}, "log_level": "info", "windows_use_single_network": true,
		"capabilities": map[string]any{"dns": true}, "DNS": dns, "nodename": cfg.node,
		"nodename_file_optional": true, "datastore_type": "kubernetes",
		"kubernetes":           map[string]any{"kubeconfig": `C:\etc\cni\net.d\calico-kubeconfig`},
		"ipam":                 map[string]any{"type": "calico-ipam", "subnet": "usePodCidr", "_standin_pod_cidr": subnet.String()},
		"policies":             []any{},
		"windows_loopback_DSR": true,
	}
	return json.MarshalIndent(map[string]any{"name": networkName, "cniVersion": "0.3.1", "plugins": []any{plugin}}, "", "  ")
}
