// Package preflight holds win_preflight: the checks a join makes before it
// changes anything, each of which would otherwise fail later, halfway
// through a join, with an error that does not say why (a clock off by
// minutes surfaces as a certificate "not yet valid" in the kubelet's log).
//
// The module needs both sides at once: the node (through its host
// connection) and the API server (through the run's cluster clients), so it
// lives in neither modules/windows nor modules/kube. It reads the API
// server's address and clock itself rather than taking them as arguments:
// arguments are part of a saved plan's fingerprint, and a clock reading
// differs on every run.
package preflight

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	kubemod "github.com/wsu-project/wsu/modules/kube"
	"github.com/wsu-project/wsu/modules/modutil"
	"github.com/wsu-project/wsu/modules/windows"
)

// Modules returns this package's modules, getting cluster clients from
// cache (nil: schemas only; a task then fails saying so).
func Modules(cache *kube.Cache) []modules.Module {
	return []modules.Module{Preflight{Cache: cache}}
}

// Preflight is win_preflight.
type Preflight struct {
	Cache *kube.Cache
}

var (
	_ modules.Module    = Preflight{}
	_ modules.Validator = Preflight{}
)

// DefaultMinBuild is Windows Server 2019's build, the oldest Kubernetes
// supports for Windows nodes.
const DefaultMinBuild = 17763

var attributes = []modules.Attribute{
	{Name: "node_name", Type: cty.String, Required: true,
		Description: "The name the node will register (join's `node_name`, else the host name lower-cased)."},
	{Name: "min_build", Type: cty.Number, Default: cty.NumberIntVal(DefaultMinBuild),
		Description: "Oldest Windows build accepted (17763: Windows Server 2019)."},
	{Name: "services", Type: cty.List(cty.String), Default: cty.ListValEmpty(cty.String),
		Description: "Services that must not exist unless wsu installed them."},
	{Name: "adopt", Type: cty.List(cty.String), Default: cty.ListValEmpty(cty.String),
		Description: "Services of `services` that may exist installed by someone else, because the join takes them over on purpose (an image that carries a `kubelet` service, as image-builder's Windows images do): the check passes and says it adopts them; the task that configures the service shows in the plan what changes in it."},
	{Name: "adopt_wmco", Type: cty.Bool, Default: cty.False,
		Description: "Take over the `services` WMCO created (their description starts with WMCO's marker `\"" + kube.WMCOServiceMarker + "\"`): a host WMCO configured moves to wsu without being removed and joined again. The check passes and says it adopts them; the tasks that configure them show in the plan what changes."},
	{Name: "payload", Type: cty.Map(cty.String), Default: cty.MapValEmpty(cty.String), Local: true,
		Description: "Files the join will copy: node path → local path on the machine running wsu. A node path that already holds a file of the same size needs no new space."},
	{Name: "disk_path", Type: cty.String, Default: cty.StringVal(`C:\`),
		Description: "A path on the volume the payload goes to."},
	{Name: "disk_reserve", Type: cty.Number, Default: cty.NumberIntVal(0),
		Description: "Bytes that must stay free beyond the payload (logs, images)."},
	{Name: "max_clock_skew", Type: cty.Number, Default: cty.NumberIntVal(5),
		Description: "Seconds the host's clock may differ from the API server's."},
	{Name: "api_server", Type: cty.String,
		Description: "API server URL the node will use; null: the cluster's (see above)."},
	{Name: "dial_timeout", Type: cty.Number, Default: cty.NumberIntVal(10),
		Description: "Seconds the node may take to connect to the API server."},
	{Name: "kubeconfig", Type: cty.String,
		Description: "Kubeconfig for the cluster; null: the command line's `--kubeconfig`, `KUBECONFIG`, the pod's service account, `~/.kube/config`."},
	{Name: "kubeconfig_data", Type: cty.String, Sensitive: true, Credential: true,
		Description: "A kubeconfig's content instead of `kubeconfig` (a node-only join's bootstrap kubeconfig, from `k8s_discovery`)."},
	{Name: "context", Type: cty.String,
		Description: "Kubeconfig context; null: the current one."},
}

var results = []modules.Attribute{
	{Name: "checks", Type: cty.Map(cty.String), Description: "Each check that passed, by name (`node_name`, `build`, `services`, `disk`, `clock`, `api_server`), with what it found."},
	{Name: "api_server", Type: cty.String, Description: "The API server address (`host:port`) the node was asked to reach."},
	{Name: "installed", Type: cty.List(cty.String), Description: "The `services` that exist already, installed by wsu (a node configured before): join clears stale CNI state only when the kubelet is not among them."},
	{Name: "wmco", Type: cty.Bool, Description: "Whether a service of `services` is WMCO's and adopted (`adopt_wmco`): the host is one WMCO configured."},
	{Name: "summary", Type: cty.String, Description: "The checks that passed, in a sentence."},
}

func (Preflight) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_preflight",
		Summary: "Check, before a join changes anything, that the node can join.",
		Description: "Runs every check and fails with one error per problem, each at the argument it " +
			"concerns, in plan and apply alike; it never changes anything. The checks:\n\n" +
			"- `node_name` is a lowercase RFC 1123 name of at most 63 characters (the name the kubelet will register);\n" +
			"- the host's Windows build is at least `min_build`;\n" +
			"- none of `services` exists unless wsu installed it (its description starts with wsu's marker, `\"" + windows.ManagedDescription + "\"`), `adopt` names it, or, with `adopt_wmco`, WMCO created it: a container runtime or kubelet installed by someone else would fight the ones join installs;\n" +
			"- the volume holding `disk_path` has room for the `payload` files not already on the node, plus `disk_reserve`;\n" +
			"- the host's clock is within `max_clock_skew` seconds of the API server's (read from the `Date` header of `GET /version` and compared through this machine's clock, allowing for the round trips); certificates fail later otherwise;\n" +
			"- the node can open a TCP connection to the API server: `api_server`, else the address nodes use (OpenShift's `apiServerInternalURI`, kubeadm's `kube-public/cluster-info`, else the URL wsu talks to).\n\n" +
			"The result lists what each passed check found; `wsu plan` shows the summary.",
		Target:     modules.TargetHost,
		Attributes: attributes,
		Results:    results,
		Show:       "summary",
		Example: `task "preflight" {
  win_preflight {
    node_name = lower(host.facts.hostname)
    services  = ["containerd", "kubelet"]
    payload   = { "C:\\k\\kubelet.exe" = "/srv/payload/kubelet.exe" }
  }
}`,
	}
}

func (Preflight) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	for _, n := range []string{"min_build", "disk_reserve", "max_clock_skew", "dial_timeout"} {
		if v := modutil.Get(cfg, n); v.IsKnown() && !v.IsNull() && v.AsBigFloat().Sign() < 0 {
			diags = append(diags, cfg.Error(n, "Invalid "+n, n+" cannot be negative."))
		}
	}
	if u, ok := modutil.Str(modutil.Get(cfg, "api_server")); ok {
		if _, err := kube.HostPort(u); err != nil {
			diags = append(diags, cfg.Error("api_server", "Invalid api_server", fmt.Sprintf("api_server must be a URL naming a host: %v.", err)))
		}
	}
	return diags
}

// passed is one check that passed: its name and what it found.
type passed struct{ name, found string }

// run is one preflight: the configuration, the host and what was found.
type run struct {
	cfg   modules.Config
	h     host.Host
	cl    *kube.Client
	ok    []passed
	diags hcl.Diagnostics
	// installed are the services of "services" that exist and are wsu's.
	installed []string
	// wmco: a service of "services" is WMCO's and adopted.
	wmco   bool
	server string // host:port
}

func (r *run) pass(name, found string) { r.ok = append(r.ok, passed{name, found}) }

func (r *run) fail(attr, summary, detail string) {
	r.diags = append(r.diags, r.cfg.Error(attr, summary, detail))
}

func (m Preflight) check(ctx context.Context, cfg modules.Config, h host.Host) (cty.Value, hcl.Diagnostics) {
	if !cfg.Value.IsWhollyKnown() {
		return modutil.UnknownResult(results), nil
	}
	r := &run{cfg: cfg, h: h}
	r.nodeName()
	nodeChecks := []func(*run, context.Context){(*run).build, (*run).services, (*run).disk}
	cluster := &run{cfg: cfg, h: h}
	var clusterChecks []func(*run, context.Context)
	if cluster.connect(m.Cache) {
		clusterChecks = []func(*run, context.Context){(*run).apiServer, (*run).clock}
	}
	// The checks read different things, each a round trip or a few to the
	// node or the API server: they run side by side, and what they found
	// is told in this order, the connection's errors before the API
	// server's checks.
	parts := sideBySide(ctx, cluster, append(nodeChecks, clusterChecks...))
	for _, p := range parts[:len(nodeChecks)] {
		r.merge(p)
	}
	r.merge(cluster)
	for _, p := range parts[len(nodeChecks):] {
		r.merge(p)
	}
	return r.result(), r.diags
}

// sideBySide runs each check on a run of its own (with base's cluster
// client) at once, and returns the runs in the checks' order.
func sideBySide(ctx context.Context, base *run, checks []func(*run, context.Context)) []*run {
	parts := make([]*run, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		parts[i] = &run{cfg: base.cfg, h: base.h, cl: base.cl}
		wg.Go(func() { c(parts[i], ctx) })
	}
	wg.Wait()
	return parts
}

// merge adds what part found to r.
func (r *run) merge(part *run) {
	r.ok = append(r.ok, part.ok...)
	r.diags = append(r.diags, part.diags...)
	r.installed = append(r.installed, part.installed...)
	r.wmco = r.wmco || part.wmco
	if part.server != "" {
		r.server = part.server
	}
}

func (m Preflight) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.check(ctx, req.Config, req.Host)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m Preflight) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.check(ctx, req.Config, req.Host)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}

func (r *run) result() cty.Value {
	checks := map[string]cty.Value{}
	var found []string
	for _, p := range r.ok {
		checks[p.name] = cty.StringVal(p.found)
		found = append(found, p.found)
	}
	summary := fmt.Sprintf("%d checks passed: %s", len(r.ok), strings.Join(found, "; "))
	if len(r.ok) == 0 {
		summary = "no check passed"
	}
	vals := map[string]cty.Value{"checks": cty.MapValEmpty(cty.String), "summary": cty.StringVal(summary),
		"installed": modutil.Strings(r.installed), "wmco": cty.BoolVal(r.wmco)}
	if len(checks) > 0 {
		vals["checks"] = cty.MapVal(checks)
	}
	if r.server != "" {
		vals["api_server"] = cty.StringVal(r.server)
	}
	return modutil.Result(results, vals)
}

// nodeName: the kubelet registers this name, the CSRs carry it and
// hostnames cap a DNS label at 63 characters.
func (r *run) nodeName() {
	name, _ := modutil.Str(modutil.Get(r.cfg, "node_name"))
	var problems []string
	if len(name) > 63 {
		problems = append(problems, fmt.Sprintf("it has %d characters, at most 63 are allowed", len(name)))
	}
	if name != strings.ToLower(name) {
		problems = append(problems, "it has upper-case letters")
	}
	problems = append(problems, validation.IsDNS1123Subdomain(strings.ToLower(name))...)
	if len(problems) > 0 {
		r.fail("node_name", "Invalid node name",
			fmt.Sprintf("The node would register as %q, which is not a lowercase RFC 1123 name of at most 63 characters: %s. Set node_name to a valid name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit).",
				name, strings.Join(problems, "; ")))
		return
	}
	r.pass("node_name", "node name "+name)
}

func (r *run) build(ctx context.Context) {
	f, err := r.h.Facts(ctx)
	if err != nil {
		r.fail("min_build", "Cannot read the host's Windows build", err.Error())
		return
	}
	minBuild := intAttr(r.cfg, "min_build")
	build, err := strconv.ParseInt(f.Build, 10, 64)
	switch {
	case f.OS != "windows":
		r.fail("min_build", "Not a Windows host", fmt.Sprintf("The host reports itself as %q; only Windows hosts join as Windows nodes.", f.OS))
	case err != nil:
		r.fail("min_build", "Unknown Windows build", fmt.Sprintf("The host reports build %q, which is not a number.", f.Build))
	case build < minBuild:
		r.fail("min_build", "Windows build not supported",
			fmt.Sprintf("The host runs Windows build %d; Windows nodes need build %d or later (17763 is Windows Server 2019, 20348 Windows Server 2022). Upgrade the host, or lower min_build if you know the build works.", build, minBuild))
	default:
		r.pass("build", fmt.Sprintf("Windows build %d", build))
	}
}

func (r *run) services(ctx context.Context) {
	names, _ := strList(modutil.Get(r.cfg, "services"))
	adopt, _ := strList(modutil.Get(r.cfg, "adopt"))
	adoptWMCO := modutil.Get(r.cfg, "adopt_wmco").True()
	var foreign, adopted []string
	for _, n := range names {
		info, err := r.h.QueryService(ctx, n)
		if err != nil {
			r.fail("services", "Cannot query service "+n, err.Error())
			return
		}
		if info.Exists && strings.HasPrefix(info.Config.Description, windows.ManagedDescription) {
			r.installed = append(r.installed, n)
		}
		foreignService := info.Exists && !strings.HasPrefix(info.Config.Description, windows.ManagedDescription)
		if foreignService && adoptWMCO && strings.HasPrefix(info.Config.Description, kube.WMCOServiceMarker) {
			r.wmco = true
			adopted = append(adopted, fmt.Sprintf("WMCO's %s (binary %s)", n, info.Config.BinaryPath))
			continue
		}
		if foreignService && slices.Contains(adopt, n) {
			adopted = append(adopted, fmt.Sprintf("%s (binary %s)", n, info.Config.BinaryPath))
			continue
		}
		if foreignService {
			foreign = append(foreign, n)
			r.fail("services", "Service "+n+" is not wsu's", foreignDetail(n, info.Config))
		}
	}
	switch {
	case len(foreign) == 0 && len(adopted) > 0:
		r.pass("services", "adopting "+strings.Join(adopted, ", ")+", installed by someone else")
	case len(foreign) == 0 && len(names) > 0:
		r.pass("services", "no service of "+strings.Join(names, ", ")+" installed by anyone else")
	}
}

// foreignDetail says why a service someone else installed is refused,
// and what to do.
func foreignDetail(name string, c host.ServiceConfig) string {
	d := fmt.Sprintf("Service %s exists (binary %s, description %q) and wsu did not install it: join would reconfigure it under its own settings, and remove would then leave it behind. ",
		name, c.BinaryPath, c.Description)
	if strings.HasPrefix(c.Description, kube.WMCOServiceMarker) {
		return d + "WMCO created it: set adopt_wmco = true (join's default) for join to take the host over, once WMCO no longer runs."
	}
	return d + "Uninstall it first, or, for a container runtime you keep on purpose, set manage_containerd = false."
}

func (r *run) disk(ctx context.Context) {
	path, _ := modutil.Str(modutil.Get(r.cfg, "disk_path"))
	need, err := r.payloadBytes(ctx)
	if err != nil {
		r.fail("payload", "Cannot size the payload", err.Error())
		return
	}
	need += uint64(intAttr(r.cfg, "disk_reserve")) //nolint:gosec // Validate refuses negatives
	ds, err := r.h.DiskFree(ctx, path)
	if err != nil {
		r.fail("disk_path", "Cannot read the free disk space", err.Error())
		return
	}
	if ds.Free < need {
		r.fail("disk_path", "Not enough free disk space",
			fmt.Sprintf("The volume holding %s has %s free; the payload and reserve need %s. Free some space (or grow the volume) and run again.", path, size(ds.Free), size(need)))
		return
	}
	r.pass("disk", fmt.Sprintf("%s free on %s (%s needed)", size(ds.Free), path, size(need)))
}

// payloadBytes is the size of the payload files the node lacks: a file of
// the same size already there is taken as the same file (its space is
// spent already).
func (r *run) payloadBytes(ctx context.Context) (uint64, error) {
	payload := modutil.Get(r.cfg, "payload")
	type file struct{ dest, src string }
	var files []file
	for it := payload.ElementIterator(); it.Next(); {
		k, v := it.Element()
		files = append(files, file{k.AsString(), v.AsString()})
	}
	// One stat per file on the node, a few at once; the first error in
	// the payload's order is the one told.
	need := make([]uint64, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, statsAtOnce)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			need[i], errs[i] = lacking(ctx, r.h, f.dest, f.src)
		})
	}
	wg.Wait()
	var total uint64
	for i := range files {
		if errs[i] != nil {
			return 0, errs[i]
		}
		total += need[i]
	}
	return total, nil
}

// statsAtOnce bounds the payload stats in flight on one connection.
const statsAtOnce = 8

// lacking is src's size unless dest on the node already has it.
func lacking(ctx context.Context, h host.Host, dest, src string) (uint64, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return 0, err
	}
	on, err := h.Stat(ctx, dest)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", dest, err)
	}
	if on.Exists && on.Size == fi.Size() {
		return 0, nil
	}
	return uint64(fi.Size()), nil //nolint:gosec // a size is not negative
}

// connect gets the cluster client; false (with an error) when there is
// none.
func (r *run) connect(cache *kube.Cache) bool {
	cl, _, diags := kubemod.Connect(cache, r.cfg)
	r.diags = append(r.diags, diags...)
	r.cl = cl
	return cl != nil
}

func (r *run) apiServer(ctx context.Context) {
	u, ok := modutil.Str(modutil.Get(r.cfg, "api_server"))
	if !ok {
		var err error
		if u, err = kube.NodeAPIURL(ctx, r.cl); err != nil {
			r.fail("api_server", "Cannot find the API server URL nodes use", err.Error()+". Set api_server.")
			return
		}
	}
	addr, err := kube.HostPort(u)
	if err != nil {
		r.fail("api_server", "Invalid API server URL", fmt.Sprintf("%s: %v. Set api_server.", u, err))
		return
	}
	r.server = addr
	timeout := seconds(modutil.Get(r.cfg, "dial_timeout"))
	if err := r.h.DialTCP(ctx, addr, timeout); err != nil {
		r.fail("api_server", "API server unreachable from the node",
			fmt.Sprintf("The node cannot connect to the API server at %s: %v. The kubelet will not register until it can: check the node's routes, DNS and firewalls (and a proxy's NO_PROXY), or set api_server to the address nodes use.", addr, err))
		return
	}
	r.pass("api_server", "API server "+addr+" reachable from the node")
}

// clock compares the host's clock with the API server's through this
// machine's: each offset is measured against the midpoint of its round
// trip, and the tolerance grows by what the round trips leave unknown.
func (r *run) clock(ctx context.Context) {
	server, serverUnc, err := kube.ClockOffset(ctx, r.cl)
	if err != nil {
		r.fail("max_clock_skew", "Cannot read the API server's clock", err.Error())
		return
	}
	start := time.Now()
	t, err := r.h.SystemTime(ctx)
	end := time.Now()
	if err != nil {
		r.fail("max_clock_skew", "Cannot read the host's clock", err.Error())
		return
	}
	hostOff := t.Sub(start.Add(end.Sub(start) / 2))
	skew := hostOff - server
	limit := seconds(modutil.Get(r.cfg, "max_clock_skew"))
	slack := serverUnc + end.Sub(start)/2
	if skew.Abs() > limit+slack {
		dir := "ahead of"
		if skew < 0 {
			dir = "behind"
		}
		r.fail("max_clock_skew", "Host clock off the API server's",
			fmt.Sprintf("The host's clock is %.1fs %s the API server's (at most %.0fs allowed, ±%.1fs for the measurement). Certificates would fail with \"not yet valid\" or \"expired\" errors: synchronise the host's time (w32tm /resync, or the same NTP source as the cluster) and run again.",
				skew.Abs().Seconds(), dir, limit.Seconds(), slack.Seconds()))
		return
	}
	r.pass("clock", fmt.Sprintf("clock %+.1fs from the API server's", skew.Seconds()))
}

func intAttr(cfg modules.Config, name string) int64 {
	v := modutil.Get(cfg, name)
	if !v.IsKnown() || v.IsNull() {
		return 0
	}
	i, _ := v.AsBigFloat().Int64()
	return i
}

func seconds(v cty.Value) time.Duration {
	if !v.IsKnown() || v.IsNull() {
		return 0
	}
	f, _ := new(big.Float).Mul(v.AsBigFloat(), big.NewFloat(float64(time.Second))).Float64()
	return time.Duration(f)
}

func strList(v cty.Value) ([]string, bool) {
	if !v.IsKnown() || v.IsNull() {
		return nil, false
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		s, _ := modutil.Str(e)
		out = append(out, s)
	}
	sort.Strings(out)
	return out, true
}

// size renders bytes in binary units, one decimal.
func size(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
