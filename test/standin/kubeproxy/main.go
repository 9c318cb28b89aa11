// Command kubeproxy is a TEST STAND-IN for kube-proxy.exe (winkernel), not
// a product binary and not a proxy: it programs no load balancers. It
// shows that kube-proxy's identity and host network work:
//
//   - Credentials: --kubeconfig=PATH (kube-proxy as a node service; a
//     Windows path goes through the simulated host), else in-cluster as the
//     kube-proxy-windows HostProcess pod (ServiceAccount kube-proxy; see
//     test/standin/incluster).
//   - In the HostProcess pod (CONTAINER_SANDBOX_MOUNT_POINT set), it first
//     does what sig-windows-tools' start.ps1 does before starting
//     kube-proxy: wait for the HNS network KUBE_NETWORK (default Calico)
//     and, when it is type Overlay, for its host endpoint <network>_ep,
//     whose address becomes the source VIP.
//   - It lists Services and EndpointSlices (discovery.k8s.io) as that
//     identity, prints "synced: ... as <user>" and keeps watching both
//     (re-listing when a watch ends). A refusal (401/403) is what the real
//     one would keep failing on: it is printed and the stand-in exits 1.
//   - SIGTERM or SIGINT: exit 0.
//
// Flags: --kubeconfig, --hostname-override (else NODE_NAME), --network-name
// and --source-vip (as the real ones; --source-vip skips the endpoint
// wait); others are logged and ignored. Limits: no proxy rules, no HNS
// load balancers, no --config file, no health or metrics servers.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/standin/incluster"
	"github.com/wsu-project/wsu/test/standin/simhost"
)

const poll = 250 * time.Millisecond

type config struct {
	kubeconfig, node, network, sourceVIP string
	hostProcess                          bool
}

func main() {
	log.SetPrefix("kube-proxy (TEST STAND-IN): ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:])
	switch {
	case ctx.Err() != nil:
		log.Print("stopping on signal")
	case err != nil:
		log.Printf("fatal: %v", err)
		os.Exit(1)
	}
}

// parseArgs takes --name=value and --name value for the flags it knows.
func parseArgs(args []string) config {
	cfg := config{node: os.Getenv("NODE_NAME"), network: os.Getenv("KUBE_NETWORK"),
		hostProcess: os.Getenv(incluster.EnvSandbox) != ""}
	known := map[string]*string{"kubeconfig": &cfg.kubeconfig, "hostname-override": &cfg.node,
		"network-name": &cfg.network, "source-vip": &cfg.sourceVIP}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		dst, ok := known[name]
		if !ok || !strings.HasPrefix(args[i], "-") {
			log.Printf("ignoring argument %q: the stand-in does not act on it", args[i])
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		*dst = value
	}
	if cfg.network == "" {
		cfg.network = "Calico"
	}
	return cfg
}

func run(ctx context.Context, args []string) error {
	cfg := parseArgs(args)
	paths, err := simhost.Open()
	if err != nil {
		return err
	}
	rc, err := clientConfig(paths, cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if cfg.hostProcess {
		if paths.Host == nil {
			return fmt.Errorf("a HostProcess pod on no simulated host: %s is not set", sim.EnvRoot)
		}
		if err := waitNetwork(ctx, paths.Host, &cfg); err != nil {
			return err
		}
	}
	user := whoami(ctx, cs)
	return syncAndWatch(ctx, cs, cfg, user)
}

func clientConfig(paths *simhost.Paths, cfg config) (*rest.Config, error) {
	if cfg.kubeconfig == "" {
		log.Print("no --kubeconfig: using the in-cluster ServiceAccount")
		return incluster.Config(paths)
	}
	p, err := paths.Local(cfg.kubeconfig)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, err
	}
	// A node's kubeconfig names its token and CA files by Windows paths
	// (k8s_node_identity writes tokenFile C:\k\...\token).
	for _, a := range kc.AuthInfos {
		for _, f := range []*string{&a.TokenFile, &a.ClientCertificate, &a.ClientKey} {
			if *f, err = paths.Local(*f); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range kc.Clusters {
		if c.CertificateAuthority, err = paths.Local(c.CertificateAuthority); err != nil {
			return nil, err
		}
	}
	return clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// waitNetwork is start.ps1's wait for the network and, for Overlay, its
// endpoint as the source VIP.
func waitNetwork(ctx context.Context, h *sim.Host, cfg *config) error {
	var last string
	for {
		why, done, err := networkReady(ctx, h, cfg)
		if err != nil && !errors.Is(err, sim.ErrHNSUnavailable) {
			return err
		}
		if done {
			return nil
		}
		if err != nil {
			why = err.Error()
		}
		if why != last {
			log.Printf("waiting for HNS: %s", why)
			last = why
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}

func networkReady(ctx context.Context, h *sim.Host, cfg *config) (why string, done bool, err error) {
	nets, err := h.HNSNetworks(ctx)
	if err != nil {
		return "", false, err
	}
	for _, n := range nets {
		if n.Name != cfg.network {
			continue
		}
		if n.Type != "Overlay" || cfg.sourceVIP != "" {
			log.Printf("HNS network %s (%s) found; source VIP %q", n.Name, n.Type, cfg.sourceVIP)
			return "", true, nil
		}
		eps, err := h.HNSEndpoints(ctx)
		if err != nil {
			return "", false, err
		}
		for _, ep := range eps {
			if ep.Name == cfg.network+"_ep" && ep.Network == n.Name {
				cfg.sourceVIP = ep.IP
				log.Printf("HNS network %s (Overlay) found; source VIP %s from endpoint %s", n.Name, ep.IP, ep.Name)
				return "", true, nil
			}
		}
		return "no endpoint " + cfg.network + "_ep yet", false, nil
	}
	return "no network " + cfg.network + " yet", false, nil
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

// whoami names the identity for the log; any authenticated user may ask.
func whoami(ctx context.Context, cs kubernetes.Interface) string {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return r.Status.UserInfo.Username
}

// lister is one resource kube-proxy follows.
type lister struct {
	name  string
	list  func(context.Context) (string, int, error) // resource version, count
	watch func(context.Context, string) (watch.Interface, error)
}

func resources(cs kubernetes.Interface) []lister {
	svcs, slices := cs.CoreV1().Services(""), cs.DiscoveryV1().EndpointSlices("")
	return []lister{
		{"services",
			func(ctx context.Context) (string, int, error) {
				l, err := svcs.List(ctx, metav1.ListOptions{})
				if err != nil {
					return "", 0, err
				}
				return l.ResourceVersion, len(l.Items), nil
			},
			func(ctx context.Context, rv string) (watch.Interface, error) {
				return svcs.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			}},
		{"endpointslices.discovery.k8s.io",
			func(ctx context.Context) (string, int, error) {
				l, err := slices.List(ctx, metav1.ListOptions{})
				if err != nil {
					return "", 0, err
				}
				return l.ResourceVersion, len(l.Items), nil
			},
			func(ctx context.Context, rv string) (watch.Interface, error) {
				return slices.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			}},
	}
}

// syncAndWatch lists both resources, reports, and follows them until ctx
// ends or the API server refuses the identity.
func syncAndWatch(ctx context.Context, cs kubernetes.Interface, cfg config, user string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := resources(cs)
	rvs := make([]string, len(res))
	var counts []string
	for i, r := range res {
		rv, n, err := r.list(ctx)
		if err != nil {
			return refusal(r.name, user, err)
		}
		rvs[i] = rv
		counts = append(counts, fmt.Sprintf("%d %s", n, r.name))
	}
	log.Printf("synced: listed %s as %s (node %q, network %s, source VIP %q); watching", strings.Join(counts, " and "), user,
		cfg.node, cfg.network, cfg.sourceVIP)
	var wg sync.WaitGroup
	for i, r := range res {
		wg.Add(1)
		go func() { defer wg.Done(); follow(ctx, cancel, r, rvs[i], user) }()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// follow watches one resource, re-listing when a watch ends; a refusal
// cancels everything with its error.
func follow(ctx context.Context, cancel context.CancelCauseFunc, r lister, rv, user string) {
	for ctx.Err() == nil {
		w, err := r.watch(ctx, rv)
		if err == nil {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
			}
			w.Stop()
		}
		if err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			cancel(refusal(r.name, user, err))
			return
		}
		if sleep(ctx, poll) != nil {
			return
		}
		if rv, _, err = r.list(ctx); err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			cancel(refusal(r.name, user, err))
			return
		}
	}
}

func refusal(what, user string, err error) error {
	return fmt.Errorf("failed to list/watch %s as %s: %w", what, user, err)
}
