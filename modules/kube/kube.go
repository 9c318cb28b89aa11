// Package kube holds the cluster modules: waits on and changes to Node
// objects, drains, cluster checks, Ignition, bootstrap tokens, CSR
// approval and a node's token discovery. They run on the controller
// (TargetController) and never touch the Windows host, except
// k8s_node_identity, which also keeps its token file there (NodeIdentity
// says why). Each takes optional kubeconfig, kubeconfig_data and context
// arguments and otherwise uses KUBECONFIG or the pod's service account
// (see kube.Load), except k8s_discovery, whose point is to need no
// credential but a bootstrap token. Tasks of a run share one client per
// kubeconfig and context.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// Modules returns every module of this package, getting their clients from
// cache: one per run (kube.Cache says why).
func Modules(cache *kube.Cache) []modules.Module {
	c := Clusters{Cache: cache}
	return []modules.Module{
		NodeWait{c},
		Node{c},
		NodeCordon{c},
		NodeDrain{c},
		NodeDelete{c},
		NodeOwner{c},
		WaitAnnotation{c},
		ClusterCheck{c},
		WindowsNetwork{c},
		NodePodsWait{c},
		ClusterNetwork{c},
		KubeletConfig{c},
		ImageMirrors{c},
		TrustedCA{c},
		Proxy{c},
		Ignition{c},
		BootstrapToken{c},
		CSRApprove{c},
		MetricsEndpoint{c},
		NodeIdentity{Clusters: c},
		Discovery{},
	}
}

// Clusters is what every module here holds: the run's cluster clients.
type Clusters struct {
	// Cache is the run's client cache; modules built without one (a zero
	// value, as for schemas and docs) fail when a task needs a cluster.
	Cache *kube.Cache
}

// knownAfterApply is the Subject of a change whose target is not known yet.
const knownAfterApply = "(known after apply)"

// connAttributes are the arguments every module here takes to find its
// cluster. They go last in a schema, after the module's own.
var connAttributes = []modules.Attribute{
	{Name: "kubeconfig", Type: cty.String,
		Description: "Path of the kubeconfig file to use. Default: the command line's `--kubeconfig`, else the `KUBECONFIG` list, else the pod's service account when wsu runs in the cluster, else `~/.kube/config`."},
	{Name: "kubeconfig_data", Type: cty.String, Sensitive: true, Credential: true,
		Description: "A kubeconfig's content, used instead of `kubeconfig`: a credential a task produced and wsu never writes where it runs, such as `k8s_discovery`'s `bootstrap_kubeconfig` (a node-only join reads the cluster with its bootstrap token)."},
	{Name: "context", Type: cty.String,
		Description: "Kubeconfig context to use. Default: the kubeconfig's current context."},
}

// withConn appends the connection arguments to a module's own.
func withConn(attrs ...modules.Attribute) []modules.Attribute {
	return append(attrs, connAttributes...)
}

// client returns the run's shared client for the task's kubeconfig and
// context. known is false while either is unknown (plan of a kubeconfig an
// earlier task writes).
func (c Clusters) client(cfg modules.Config) (cl *kube.Client, known bool, diags hcl.Diagnostics) {
	return Connect(c.Cache, cfg)
}

// Connect is the client a task's connection arguments (connAttributes)
// name: kubeconfig_data's content, else the kubeconfig file and context,
// else the run's defaults. known is false while any of them is unknown.
// Modules of other packages with a cluster side (win_preflight) use it.
func Connect(cache *kube.Cache, cfg modules.Config) (*kube.Client, bool, hcl.Diagnostics) {
	kc, data, ctxName := get(cfg, "kubeconfig"), get(cfg, "kubeconfig_data"), get(cfg, "context")
	if !kc.IsKnown() || !data.IsKnown() || !ctxName.IsKnown() {
		return nil, false, nil
	}
	path, _ := str(kc)
	content, withData := str(data)
	name, _ := str(ctxName)
	if cache == nil {
		return nil, true, hcl.Diagnostics{cfg.Error("kubeconfig", "Cannot connect to the cluster",
			"This module was built without the run's cluster clients (modules/kube.Modules(cache)); a run set up by package setup always has them.")}
	}
	if withData && path != "" {
		return nil, true, hcl.Diagnostics{cfg.Error("kubeconfig_data", "Conflicting cluster credentials",
			"Set kubeconfig or kubeconfig_data, not both.")}
	}
	var cl *kube.Client
	var err error
	if withData {
		cl, err = cache.GetData([]byte(content), name)
	} else {
		cl, err = cache.Get(path, name)
	}
	if err != nil {
		attr := "kubeconfig"
		switch {
		case withData:
			attr = "kubeconfig_data"
		case name != "" && path == "":
			attr = "context"
		}
		return nil, true, hcl.Diagnostics{cfg.Error(attr, "Cannot connect to the cluster", err.Error())}
	}
	return cl, true, nil
}

// The config and result helpers are shared with the other module packages;
// modutil says why each exists.
var (
	get           = modutil.Get
	str           = modutil.Str
	isNull        = modutil.IsNull
	result        = modutil.Result
	unknownResult = modutil.UnknownResult
	requireKnown  = modutil.RequireKnown
	strList       = modutil.Strings
)

// attrNames lists a schema's argument names, for requireKnown.
func attrNames(attrs []modules.Attribute) []string {
	names := make([]string, len(attrs))
	for i, a := range attrs {
		names[i] = a.Name
	}
	return names
}

// seconds converts a known number of seconds, saturating rather than
// overflowing into a negative duration.
func seconds(v cty.Value) time.Duration {
	f, _ := v.AsBigFloat().Float64()
	if f*float64(time.Second) >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f * float64(time.Second))
}

// validateNodeName checks that a known name attribute is a valid Node name
// (a DNS subdomain, lower case).
func validateNodeName(cfg modules.Config, attr string) hcl.Diagnostics {
	name, ok := str(get(cfg, attr))
	if isNull(get(cfg, attr)) {
		return hcl.Diagnostics{cfg.Error(attr, "Missing node name", attr+" must name a node.")}
	}
	if !ok {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return hcl.Diagnostics{cfg.Error(attr, "Invalid node name",
			fmt.Sprintf("%q is not a valid node name: %s.", name, strings.Join(errs, "; ")))}
	}
	return nil
}

// validateSeconds checks known duration arguments: none negative, and those
// in positive more than zero.
func validateSeconds(cfg modules.Config, nonNegative []string, positive []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	check := func(name string, allowZero bool) {
		v := get(cfg, name)
		if !v.IsKnown() || v.IsNull() {
			return
		}
		if s := v.AsBigFloat().Sign(); s < 0 || (!allowZero && s == 0) {
			want := "cannot be negative"
			if !allowZero {
				want = "must be more than 0"
			}
			diags = append(diags, cfg.Error(name, "Invalid "+name, fmt.Sprintf("%s %s.", name, want)))
		}
	}
	for _, n := range nonNegative {
		check(n, true)
	}
	for _, n := range positive {
		check(n, false)
	}
	return diags
}

// apiError turns a failed API call into a diagnostic at attr. A refusal by
// RBAC says which permission is missing, since that is the usual fix.
func apiError(cfg modules.Config, attr, summary string, err error) hcl.Diagnostics {
	detail := err.Error()
	if apierrors.IsForbidden(err) {
		detail += "\n\nThe identity wsu runs as lacks this permission; docs/kubernetes.md lists the ClusterRole wsu needs (deploy/rbac/wsu-cluster-role.yaml)."
	}
	return hcl.Diagnostics{cfg.Error(attr, summary, detail)}
}

// transient reports whether an API error may go away by itself: the server
// is starting, overloaded or unreachable. Waits keep going through these
// and stop at once on the rest (forbidden, invalid).
func transient(err error) bool {
	var netErr net.Error
	switch {
	case err == nil:
		return false
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return true
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET):
		// What a restarting API server looks like from here.
		return true
	}
	return false
}

// pollResult is what waitFor saw last.
type pollResult struct {
	waited   time.Duration
	last     string // the last observation, for the timeout message
	timedOut bool
}

// waitFor calls check until it reports done, a non-transient error, the
// timeout or ctx's end: again as soon as an object it is given changes
// (kube.Changes: a shared watch), and at the latest every interval. check
// returns what it observed.
func waitFor(ctx context.Context, timeout, interval time.Duration, on []watchOn, check func(context.Context) (done bool, observed string, err error)) (pollResult, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	res := pollResult{last: "nothing yet"}
	changed, release := subscribe(on)
	defer release()
	for {
		woken := changed() // before looking: a change during the look wakes the next wait
		done, observed, err := check(ctx)
		res.waited = time.Since(start)
		switch {
		case err != nil && !transient(err):
			return res, err
		case err != nil:
			res.last = "error: " + err.Error()
		case done:
			res.last = observed
			return res, nil
		default:
			res.last = observed
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			res.timedOut = true
			return res, nil
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		timer := time.NewTimer(min(interval, remaining))
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-woken.done:
		}
		timer.Stop()
		woken.stop()
	}
}

// wake is one wait's channel of changes: done closes at the first change
// of any of the watched kinds; stop frees what watches them.
type wake struct {
	done <-chan struct{}
	stop func()
}

// watchOn is an object a wait reacts to: name's changes in c ("" any).
type watchOn struct {
	c    *kube.Changes
	name string
}

// subscribe joins the shared watches of on; changed returns the wake of
// one wait, release leaves them all.
func subscribe(on []watchOn) (changed func() wake, release func()) {
	var nexts []func() <-chan struct{}
	var releases []func()
	for _, w := range on {
		next, rel := w.c.Subscribe()
		name := w.name
		nexts, releases = append(nexts, func() <-chan struct{} { return next(name) }), append(releases, rel)
	}
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	changed = func() wake {
		switch len(nexts) {
		case 0:
			return wake{stop: func() {}}
		case 1:
			return wake{done: nexts[0](), stop: func() {}}
		}
		chs := make([]<-chan struct{}, len(nexts))
		for i, n := range nexts {
			chs[i] = n()
		}
		return anyOf(chs)
	}
	return changed, release
}

// anyOf is a wake that closes when any of chs closes.
func anyOf(chs []<-chan struct{}) wake {
	done, stop := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
				stopOnce.Do(func() { close(done) })
			case <-stop:
			}
		}()
	}
	return wake{done: done, stop: func() { close(stop) }}
}

// waitedVal is the waited result: seconds, to the millisecond.
func waitedVal(d time.Duration) cty.Value {
	return cty.NumberFloatVal(d.Round(time.Millisecond).Seconds())
}

// getOrNil is a Get's object, nil when it is not found; err only for
// another failure.
func getOrNil[T any](obj *T, err error) (*T, error) {
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return obj, nil
}
