// Package kube holds wsu's cluster operations: finding and sharing a client,
// Ignition and MachineConfig, bootstrap tokens, CSR validation and approval.
// The modules in modules/kube are thin wrappers around it.
package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/version"
)

// Client is everything a cluster module needs to talk to one cluster.
type Client struct {
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// CSRs is the run's shared list of CSRs for pollers (nil: list
	// through Kube each time).
	CSRs *CSRList
	// NodeChanges and CSRChanges wake the run's waiters when Nodes or
	// CSRs change, from one shared watch each (nil: waiters poll).
	NodeChanges, CSRChanges *Changes
	// Source says where the configuration came from ("kubeconfig /x",
	// "in-cluster"), for error messages.
	Source string
}

// Finder finds cluster configurations. Its zero value uses the real
// environment; tests replace the two functions, which read fixed paths
// under /var/run/secrets and the real home directory.
type Finder struct {
	// InCluster returns the pod's service-account configuration
	// (rest.InClusterConfig when nil).
	InCluster func() (*rest.Config, error)
	// HomeKubeconfig returns ~/.kube/config's path ("" when there is no home).
	HomeKubeconfig func() string
}

func (f Finder) inCluster() (*rest.Config, error) {
	if f.InCluster != nil {
		return f.InCluster()
	}
	return rest.InClusterConfig()
}

func (f Finder) home() string {
	if f.HomeKubeconfig != nil {
		return f.HomeKubeconfig()
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
}

// ErrNoConfig is returned when no kubeconfig and no in-cluster configuration
// can be found.
var ErrNoConfig = errors.New("no cluster configuration: set kubeconfig, set KUBECONFIG, run in a pod, or create ~/.kube/config")

// Load finds the cluster configuration the way controller-runtime does, so
// the CLI and the in-cluster controller agree: an explicit kubeconfig path
// (--kubeconfig or a module's kubeconfig argument), else the KUBECONFIG
// list, else the pod's service account, else ~/.kube/config. kubeContext
// selects a kubeconfig context ("" means the current one); it is an error
// with in-cluster configuration, which has no contexts.
func Load(kubeconfig, kubeContext string) (*rest.Config, error) {
	cfg, _, err := Finder{}.Load(kubeconfig, kubeContext)
	return cfg, err
}

// Load is the package's Load through f's seams; it also says where the
// configuration came from ("kubeconfig /x", "in-cluster").
func (f Finder) Load(kubeconfig, kubeContext string) (*rest.Config, string, error) {
	rules := &clientcmd.ClientConfigLoadingRules{}
	var source string
	switch {
	case kubeconfig != "":
		rules.ExplicitPath = kubeconfig
		source = "kubeconfig " + kubeconfig
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		rules.Precedence = filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar))
		source = "KUBECONFIG " + os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	default:
		cfg, err := f.inCluster()
		switch {
		case err == nil && kubeContext != "":
			return nil, "", fmt.Errorf("context %q given, but the configuration is in-cluster, which has no contexts", kubeContext)
		case err == nil:
			return tune(cfg), "in-cluster", nil
		case !errors.Is(err, rest.ErrNotInCluster):
			return nil, "", fmt.Errorf("in-cluster configuration: %w", err)
		}
		home := f.home()
		if home == "" {
			return nil, "", ErrNoConfig
		}
		if _, err := os.Stat(home); err != nil {
			return nil, "", ErrNoConfig
		}
		rules.ExplicitPath = home
		source = "kubeconfig " + home
	}
	if err := checkContext(rules, kubeContext, source); err != nil {
		return nil, "", err
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", fmt.Errorf("%s: %w", source, ErrNoConfig)
		}
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	return tune(cfg), source, nil
}

// checkContext refuses a context the kubeconfig lacks and lists the ones
// it has, as a user choosing among them needs.
func checkContext(rules *clientcmd.ClientConfigLoadingRules, kubeContext, source string) error {
	if kubeContext == "" {
		return nil
	}
	raw, err := rules.Load()
	if err != nil || raw == nil {
		return nil // reported when the configuration is built
	}
	if _, ok := raw.Contexts[kubeContext]; ok {
		return nil
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	have := "it has no contexts"
	if len(names) > 0 {
		have = "its contexts: " + strings.Join(names, ", ")
	}
	return fmt.Errorf("%s: context %q does not exist (%s)", source, kubeContext, have)
}

// kubectl's client-side rate limit: what one wsu client gets per
// hostsPerLimit hosts worked on at once.
const (
	defaultQPS    = 50
	defaultBurst  = 300
	hostsPerLimit = 10 // the engine's default forks
)

// tune names wsu in the API server's logs and lifts client-go's default
// rate limit (5 requests/s), which throttles a drain of a busy node, to
// kubectl's.
func tune(cfg *rest.Config) *rest.Config {
	cfg.UserAgent = "wsu/" + version.Version
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = defaultQPS, defaultBurst
	}
	return cfg
}

// scaleRateLimit gives a run that works on many hosts at once one
// kubectl's rate limit per hostsPerLimit of them. Every host's cluster
// tasks share the run's client, so with one kubectl's limit a fleet queues
// behind it: at --forks 50 a no-op join of 100 hosts spent most of its
// time in client-go's limiter (50 tasks asking at once wait up to 1 s for
// each request). The API server's own priority and fairness still
// protects it. A limit the configuration set itself is left alone.
func scaleRateLimit(cfg *rest.Config, parallel int) *rest.Config {
	per := (parallel + hostsPerLimit - 1) / hostsPerLimit
	if per <= 1 || cfg.RateLimiter != nil || cfg.QPS != defaultQPS || cfg.Burst != defaultBurst {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(defaultQPS*per), defaultBurst*per
	return cfg
}

// NewClient builds the clients for a configuration.
func NewClient(cfg *rest.Config, source string) (*Client, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &Client{Config: cfg, Kube: kc, Dynamic: dc, CSRs: NewCSRList(kc),
		NodeChanges: NodeChanges(kc), CSRChanges: CSRChanges(kc), Source: source}, nil
}

// Cache holds one Client per kubeconfig and context, so that every task of a
// run shares one connection pool and one rate limiter instead of building a
// client per task. A cache belongs to one run: the setup package makes one
// per run with the run's --kubeconfig and --context, and hands it to the
// cluster modules and the k8s:// inventory. Nothing is shared between runs,
// so a controller's concurrent runs for different clusters never see each
// other's clients, and credentials rotated between runs are picked up.
// It also knows when its run began (RunStart), the start of the run's CSR
// time window.
type Cache struct {
	defaults Defaults
	finder   Finder

	mu      sync.Mutex
	clients map[cacheKey]*Client
}

// Defaults are the run's --kubeconfig and --context: what a task or an
// inventory that names no cluster uses. Zero values change nothing.
type Defaults struct {
	// Kubeconfig is used whenever the caller names no kubeconfig, so it
	// reaches every cluster module of the run and a k8s:// inventory alike.
	Kubeconfig string
	// Context is used whenever the caller names neither a kubeconfig nor a
	// context: as kubectl's --context, it applies to the kubeconfig the
	// flags and environment choose, not to a file a task names itself.
	Context string
	// Parallel is how many hosts the run works on at once (--forks); the
	// clients' rate limit grows with it (scaleRateLimit). 0: one kubectl's.
	Parallel int
	// Start is when the run began (RunStart). Zero: when NewCache is
	// called, which a run does as it is set up.
	Start time.Time
}

type cacheKey struct{ kubeconfig, context, env string }

// NewCache returns an empty cache for a run with the given defaults.
func NewCache(d Defaults) *Cache { return NewCacheWith(d, Finder{}) }

// NewCacheWith is NewCache with f's seams (tests).
func NewCacheWith(d Defaults, f Finder) *Cache {
	if d.Start.IsZero() {
		d.Start = time.Now()
	}
	return &Cache{defaults: d, finder: f, clients: map[cacheKey]*Client{}}
}

// RunStart is when the cache's run began: k8s_csr_approve refuses CSRs
// created before it, less CSRClockSkew. Each run carries its own, so a
// controller running for days still judges a join's CSRs by the join's
// start, never by its own. A nil cache (modules built for schemas and
// docs) has none, and then every CSR is refused.
func (c *Cache) RunStart() time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.defaults.Start
}

// Get returns the client for kubeconfig (default: the run's, else Load's
// defaults) and context (default: the run's, else the kubeconfig's current
// one), loading it on first use. Failures are not cached: a kubeconfig
// written by an earlier task may appear later in the run.
func (c *Cache) Get(kubeconfig, kubeContext string) (*Client, error) {
	if kubeconfig == "" && kubeContext == "" {
		kubeContext = c.defaults.Context
	}
	if kubeconfig == "" {
		kubeconfig = c.defaults.Kubeconfig
	}
	key := cacheKey{kubeconfig: kubeconfig, context: kubeContext}
	if kubeconfig == "" {
		// The defaults depend on the environment, which tests change.
		key.env = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cfg, source, err := c.finder.Load(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	cl, err := NewClient(scaleRateLimit(cfg, c.defaults.Parallel), source)
	if err != nil {
		return nil, err
	}
	c.clients[key] = cl
	return cl, nil
}

// GetData returns the client for a kubeconfig held in memory rather than
// in a file: a credential a task produced, such as k8s_discovery's
// bootstrap kubeconfig, which must never be written where wsu runs. The
// cache keys it by its digest, so the same content shares one client and
// the content itself is kept only in the client's configuration.
func (c *Cache) GetData(data []byte, kubeContext string) (*Client, error) {
	sum := sha256.Sum256(data)
	key := cacheKey{kubeconfig: "data:" + hex.EncodeToString(sum[:]), context: kubeContext}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cfg, err := LoadData(data, kubeContext)
	if err != nil {
		return nil, err
	}
	cl, err := NewClient(scaleRateLimit(cfg, c.defaults.Parallel), "kubeconfig_data")
	if err != nil {
		return nil, err
	}
	c.clients[key] = cl
	return cl, nil
}

// LoadData is Load for a kubeconfig's content.
func LoadData(data []byte, kubeContext string) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig_data: %w", err)
	}
	if kubeContext != "" && raw.Contexts[kubeContext] == nil {
		return nil, fmt.Errorf("kubeconfig_data has no context %q", kubeContext)
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, overrides, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig_data: %w", err)
	}
	return tune(cfg), nil
}
