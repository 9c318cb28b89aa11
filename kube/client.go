// Package kube holds wsu's cluster operations: finding and sharing a client,
// Ignition and MachineConfig, bootstrap tokens, CSR validation and approval.
// The modules in modules/kube are thin wrappers around it.
package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
	// Source says where the configuration came from ("kubeconfig /x",
	// "in-cluster"), for error messages.
	Source string
}

// Seams for tests: in-cluster configuration reads fixed paths under
// /var/run/secrets, and the home directory is the real one.
var (
	inClusterConfig = rest.InClusterConfig
	homeKubeconfig  = func() string {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		return filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	}
)

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
	cfg, _, err := load(kubeconfig, kubeContext)
	return cfg, err
}

func load(kubeconfig, kubeContext string) (*rest.Config, string, error) {
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
		cfg, err := inClusterConfig()
		switch {
		case err == nil && kubeContext != "":
			return nil, "", fmt.Errorf("context %q given, but the configuration is in-cluster, which has no contexts", kubeContext)
		case err == nil:
			return tune(cfg), "in-cluster", nil
		case !errors.Is(err, rest.ErrNotInCluster):
			return nil, "", fmt.Errorf("in-cluster configuration: %w", err)
		}
		home := homeKubeconfig()
		if home == "" {
			return nil, "", ErrNoConfig
		}
		if _, err := os.Stat(home); err != nil {
			return nil, "", ErrNoConfig
		}
		rules.ExplicitPath = home
		source = "kubeconfig " + home
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

// tune names wsu in the API server's logs and lifts client-go's default
// rate limit (5 requests/s), which throttles a drain of a busy node, to
// kubectl's.
func tune(cfg *rest.Config) *rest.Config {
	cfg.UserAgent = "wsu/" + version.Version
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 300
	}
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
	return &Client{Config: cfg, Kube: kc, Dynamic: dc, Source: source}, nil
}

// Cache holds one Client per kubeconfig and context, so that every task of a
// run shares one connection pool and one rate limiter instead of building a
// client per task.
type Cache struct {
	mu      sync.Mutex
	clients map[cacheKey]*Client
}

type cacheKey struct{ kubeconfig, context, env string }

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{clients: map[cacheKey]*Client{}} }

// Get returns the cached client for kubeconfig and context, loading it on
// first use. Failures are not cached: a kubeconfig written by an earlier
// task may appear later in the run.
func (c *Cache) Get(kubeconfig, kubeContext string) (*Client, error) {
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
	cfg, source, err := load(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	cl, err := NewClient(cfg, source)
	if err != nil {
		return nil, err
	}
	c.clients[key] = cl
	return cl, nil
}

type cacheCtxKey struct{}

// WithCache makes Shared use cache for everything run under ctx; the
// controller gives each run its own so credentials rotated between runs are
// picked up.
func WithCache(ctx context.Context, cache *Cache) context.Context {
	return context.WithValue(ctx, cacheCtxKey{}, cache)
}

// processCache serves Shared when the context carries no cache: the CLI does
// one run per process, so the process is the run.
var processCache = NewCache()

type kubeconfigCtxKey struct{}

// WithKubeconfig makes Shared use path whenever its caller names no
// kubeconfig: the CLI's --kubeconfig, which thereby reaches every cluster
// module of the run and a k8s:// inventory alike. "" changes nothing.
func WithKubeconfig(ctx context.Context, path string) context.Context {
	if path == "" {
		return ctx
	}
	return context.WithValue(ctx, kubeconfigCtxKey{}, path)
}

type kubeContextCtxKey struct{}

// WithKubeContext makes Shared use the kubeconfig context name whenever its
// caller names neither a kubeconfig nor a context: the CLI's --context, as
// kubectl's, applies to the kubeconfig the flags and environment choose,
// not to a file a task names itself. "" changes nothing.
func WithKubeContext(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, kubeContextCtxKey{}, name)
}

// Shared returns the run's client for kubeconfig (default: WithKubeconfig's,
// else Load's defaults) and context (default: WithKubeContext's, else the
// kubeconfig's current one): the one from WithCache's cache, else the
// process-wide one.
func Shared(ctx context.Context, kubeconfig, kubeContext string) (*Client, error) {
	if kubeconfig == "" && kubeContext == "" {
		kubeContext, _ = ctx.Value(kubeContextCtxKey{}).(string)
	}
	if kubeconfig == "" {
		kubeconfig, _ = ctx.Value(kubeconfigCtxKey{}).(string)
	}
	cache, _ := ctx.Value(cacheCtxKey{}).(*Cache)
	if cache == nil {
		cache = processCache
	}
	return cache.Get(kubeconfig, kubeContext)
}
