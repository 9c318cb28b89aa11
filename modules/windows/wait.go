package windows

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Wait blocks until a service, file, HNS network or TCP port on a Windows
// host is as required.
type Wait struct{}

var (
	_ modules.Module    = Wait{}
	_ modules.Validator = Wait{}
)

var waitResults = []modules.Attribute{
	{Name: "observed", Type: cty.String, Description: "What was last seen: the service state (`\"absent\"` when it does not exist), `\"exists\"`/`\"missing\"` for a file or network, `\"open\"`/`\"closed\"` for a port."},
	{Name: "waited", Type: cty.Number, Description: "Seconds spent waiting; 0 when the condition already held."},
}

// waitTargets are the mutually exclusive things to wait for.
var waitTargets = []string{"service", "file", "hns_network", "port"}

// defaultPortHost is where a port is probed when host is not set: the node
// itself, as Ansible's win_wait_for does.
const defaultPortHost = "127.0.0.1"

// dialTimeout bounds one port probe: at least a second (a SYN to a busy
// host), at most ten (a dropped SYN must not outlast a short wait), else
// the interval.
func dialTimeout(interval time.Duration) time.Duration {
	return min(max(interval, time.Second), 10*time.Second)
}

func (Wait) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_wait",
		Summary: "Wait until a service reaches a state, a file exists, an HNS network appears or a TCP port opens or closes.",
		Description: "Checks one condition on the host, set by exactly one of `service`, `file`, " +
			"`hns_network` and `port`. When it already holds the task makes no change; otherwise apply checks " +
			"again after 100 ms, then at gaps that grow by half up to `interval` seconds, until it holds or `timeout` passes, and then fails " +
			"naming what it waited for and what it saw last. Errors while checking (the connection " +
			"drops while hybrid-overlay reconfigures the network) count as \"not yet\" until the " +
			"timeout; an operation the platform does not support fails at once.\n\n" +
			"A port is probed by the agent on the node (`net.dial`), so `host = \"127.0.0.1\"` is " +
			"the node itself and any other address is reached through the node's network, not the " +
			"controller's. A probe that connects is `open`; refused, timed out (each probe waits the " +
			"`interval`, between 1 and 10 seconds) or unroutable is `closed`.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "service", Type: cty.String,
				Description: "Name of a service to wait for; see `state`."},
			{Name: "state", Type: cty.String,
				Description: "With `service`: `\"running\"` (the default), `\"stopped\"` or `\"absent\"` (deleted). " +
					"With `port`: `\"open\"` (the default) or `\"closed\"`."},
			{Name: "file", Type: cty.String,
				Description: "Absolute Windows path that must exist (a file or directory)."},
			{Name: "hns_network", Type: cty.String,
				Description: "Name of an HNS network that must exist (compared case-insensitively)."},
			{Name: "port", Type: cty.Number,
				Description: "TCP port (1-65535) to wait for, probed from the node; see `host` and `state`."},
			{Name: "host", Type: cty.String,
				Description: "With `port`: the address (IP or name) to probe, as the node resolves and routes it. Default `\"127.0.0.1\"`, the node itself."},
			{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(300),
				Description: "Seconds to wait before failing."},
			{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(2),
				Description: "Most seconds between checks: the first comes after 100 ms (or `interval`, if shorter), each next one after twice the last gap, up to this."},
		},
		Results: waitResults,
		Example: `task "overlay_network" {
  win_wait {
    hns_network = "OVNKubernetesHybridOverlayNetwork"
    timeout     = 600
  }
}`,
	}
}

func (Wait) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	var set []string
	for _, t := range waitTargets {
		if !isNull(get(cfg, t)) {
			set = append(set, t)
		}
	}
	switch {
	case len(set) == 0:
		diags = append(diags, cfg.Error("service", "Nothing to wait for",
			"Set exactly one of service, file, hns_network and port."))
	case len(set) > 1:
		diags = append(diags, cfg.Error(set[1], "Conflicting wait targets",
			fmt.Sprintf("%s and %s are both set; a task waits for one thing.", set[0], set[1])))
	}
	service, port := !isNull(get(cfg, "service")), !isNull(get(cfg, "port"))
	if !isNull(get(cfg, "state")) && !service && !port {
		diags = append(diags, cfg.Error("state", "state without service or port",
			"state applies only to a service or a port; a file or network is waited for until it exists."))
	}
	if !isNull(get(cfg, "host")) && !port {
		diags = append(diags, cfg.Error("host", "host without port",
			"host says where a port is probed; set port, or drop host."))
	}
	diags = append(diags, validateServiceName(cfg, "service")...)
	switch {
	case service:
		diags = append(diags, validateEnum(cfg, "state", "running", "stopped", "absent")...)
	case port:
		diags = append(diags, validateEnum(cfg, "state", "open", "closed")...)
	}
	if v := get(cfg, "port"); !isNull(v) && v.IsKnown() {
		if bf := v.AsBigFloat(); !bf.IsInt() || bf.Sign() <= 0 || bf.Cmp(big.NewFloat(65535)) > 0 {
			diags = append(diags, cfg.Error("port", "Invalid port", fmt.Sprintf("port must be a whole number from 1 to 65535, not %s.", bf.Text('g', -1))))
		}
	}
	if h, ok := str(get(cfg, "host")); ok && (strings.TrimSpace(h) == "" || strings.ContainsAny(h, " /\\")) {
		diags = append(diags, cfg.Error("host", "Invalid host", fmt.Sprintf("host %q is not an address or host name.", h)))
	}
	diags = append(diags, validatePath(cfg, "file")...)
	if n, ok := str(get(cfg, "hns_network")); ok && strings.TrimSpace(n) == "" {
		diags = append(diags, cfg.Error("hns_network", "Empty network name", "hns_network must name a network."))
	}
	for _, a := range []struct {
		name      string
		allowZero bool
	}{{"timeout", true}, {"interval", false}} {
		v := get(cfg, a.name)
		if !v.IsKnown() {
			continue
		}
		if v.IsNull() || v.AsBigFloat().Sign() < 0 || (!a.allowZero && v.AsBigFloat().Sign() == 0) {
			want := "cannot be negative"
			if !a.allowZero {
				want = "must be more than 0"
			}
			diags = append(diags, cfg.Error(a.name, "Invalid "+a.name, fmt.Sprintf("%s %s.", a.name, want)))
		}
	}
	return diags
}

// waitFor is the decoded condition.
type waitFor struct {
	kind  string // one of waitTargets
	what  string // for a port, host:port
	state string // the service or port state wanted
	every time.Duration
}

func (w waitFor) String() string {
	switch w.kind {
	case "service":
		if w.state == "absent" {
			return fmt.Sprintf("service %s to be deleted", w.what)
		}
		return fmt.Sprintf("service %s to be %s", w.what, w.state)
	case "file":
		return fmt.Sprintf("file %s to exist", w.what)
	case "port":
		return fmt.Sprintf("port %s to be %s", w.what, w.state)
	}
	return fmt.Sprintf("HNS network %s to exist", w.what)
}

// want is the observation that satisfies the condition.
func (w waitFor) want() string {
	if w.kind == "service" || w.kind == "port" {
		return w.state
	}
	return "exists"
}

// decodeWait returns the condition, or ok=false with the subject to show
// while part of it is unknown.
func decodeWait(cfg modules.Config) (w waitFor, subject string, ok bool) {
	for _, t := range waitTargets {
		v := get(cfg, t)
		if isNull(v) {
			continue
		}
		w.kind = t
		if t == "port" {
			w.what, ok = portAddress(cfg)
			continue
		}
		w.what, ok = str(v)
		if !ok {
			w.what = knownAfterApply
		}
	}
	stateOK := true
	switch st := get(cfg, "state"); {
	case isNull(st) && w.kind == "port":
		w.state = "open"
	case isNull(st):
		w.state = "running"
	default:
		if w.state, stateOK = str(st); !stateOK {
			w.state = knownAfterApply
		}
	}
	ok = ok && (w.kind != "service" && w.kind != "port" || stateOK)
	if v := get(cfg, "interval"); v.IsKnown() && !v.IsNull() {
		w.every = seconds(v)
	}
	return w, "wait for " + w.String(), ok
}

// portAddress is host:port, or what is known of it.
func portAddress(cfg modules.Config) (string, bool) {
	h, port := defaultPortHost, knownAfterApply
	hostOK, portOK := true, false
	if v := get(cfg, "host"); !isNull(v) {
		if h, hostOK = str(v); !hostOK {
			h = knownAfterApply
		}
	}
	if v := get(cfg, "port"); v.IsKnown() && !v.IsNull() {
		port, portOK = v.AsBigFloat().Text('f', 0), true
	}
	return net.JoinHostPort(h, port), hostOK && portOK
}

// probe checks the condition once and reports what it saw, and why when
// that is worth telling (a port's refusal).
func probe(ctx context.Context, h host.Host, w waitFor) (observed, why string, err error) {
	if w.kind == "port" {
		err := h.DialTCP(ctx, w.what, dialTimeout(w.every))
		switch {
		case err == nil:
			return "open", "", nil
		case errors.Is(err, host.ErrUnreachable):
			return "closed", err.Error(), nil // an answer, not a failure
		}
		return "", "", err
	}
	observed, err = probeState(ctx, h, w)
	return observed, "", err
}

// probeState checks a service, file or network.
func probeState(ctx context.Context, h host.Host, w waitFor) (observed string, err error) {
	switch w.kind {
	case "service":
		info, err := h.QueryService(ctx, w.what)
		if err != nil {
			return "", err
		}
		if !info.Exists {
			return "absent", nil
		}
		return string(info.State), nil
	case "file":
		fi, err := h.Stat(ctx, w.what)
		if err != nil {
			return "", err
		}
		if fi.Exists {
			return "exists", nil
		}
		return "missing", nil
	}
	nets, err := h.HNSNetworks(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	for _, n := range nets {
		if strings.EqualFold(n.Name, w.what) {
			return "exists", nil
		}
		names = append(names, n.Name)
	}
	if len(names) == 0 {
		return "missing (no HNS networks)", nil
	}
	sort.Strings(names)
	return fmt.Sprintf("missing (networks: %s)", strings.Join(names, ", ")), nil
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

func (m Wait) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	w, subject, ok := decodeWait(cfg)
	pending := func(observed cty.Value, diags hcl.Diagnostics) modules.PlanResponse {
		want := cty.UnknownVal(cty.String)
		if ok {
			want = cty.StringVal(w.want())
		}
		return modules.PlanResponse{
			Change: &modules.Change{Action: modules.Run, Subject: subject, Fields: []modules.FieldChange{
				{Name: "state", Old: observed, New: want},
			}},
			Result:      result(waitResults, map[string]cty.Value{"observed": want, "waited": cty.UnknownVal(cty.Number)}),
			Diagnostics: diags,
		}
	}
	if !ok {
		return pending(cty.UnknownVal(cty.String), nil)
	}
	if w.kind == "file" {
		if diags := onWindows(ctx, req.Host, cfg, "file"); diags.HasErrors() {
			return modules.PlanResponse{Result: unknownResult(waitResults), Diagnostics: diags}
		}
	}
	observed, _, err := probe(ctx, req.Host, w)
	switch {
	case errors.Is(err, host.ErrNotSupported):
		return modules.PlanResponse{Result: unknownResult(waitResults), Diagnostics: hostError(cfg, w.kind, "Cannot check "+w.kind, err)}
	case err != nil:
		// Apply keeps checking through errors, so the plan is a wait.
		return pending(cty.UnknownVal(cty.String), hcl.Diagnostics{{
			Severity: hcl.DiagWarning,
			Summary:  "Cannot check " + w.kind + " yet",
			Detail:   err.Error(),
			Subject:  cfg.Range(w.kind),
		}})
	case observed == w.want():
		return modules.PlanResponse{Result: result(waitResults, map[string]cty.Value{
			"observed": cty.StringVal(observed), "waited": cty.NumberIntVal(0),
		})}
	}
	return pending(cty.StringVal(observed), nil)
}

func (m Wait) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "service", "state", "file", "hns_network", "port", "host", "timeout", "interval"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(waitResults), Diagnostics: diags}
	}
	w, _, _ := decodeWait(cfg)
	timeout, interval := seconds(get(cfg, "timeout")), seconds(get(cfg, "interval"))
	h := req.Host
	if w.kind == "file" {
		if diags := onWindows(ctx, h, cfg, "file"); diags.HasErrors() {
			return modules.ApplyResponse{Result: unknownResult(waitResults), Diagnostics: diags}
		}
	}

	start := time.Now()
	deadline := start.Add(timeout)
	last := "nothing yet"
	gap := min(firstGap, interval)
	for {
		observed, why, err := probe(ctx, h, w)
		switch {
		case errors.Is(err, host.ErrNotSupported):
			return modules.ApplyResponse{Result: unknownResult(waitResults), Diagnostics: hostError(cfg, w.kind, "Cannot check "+w.kind, err)}
		case errors.Is(err, host.ErrConnectionLost):
			// Waiting on a dead connection would only time out: hand the
			// loss to the engine, which reconnects and runs the wait again.
			return modules.ApplyResponse{Result: unknownResult(waitResults), Diagnostics: hostError(cfg, w.kind, "Connection lost while waiting for "+w.String(), err)}
		case err != nil:
			last = "error: " + err.Error()
		case observed == w.want():
			return modules.ApplyResponse{Result: result(waitResults, map[string]cty.Value{
				"observed": cty.StringVal(observed),
				"waited":   cty.NumberFloatVal(time.Since(start).Round(time.Millisecond).Seconds()),
			})}
		case why != "":
			last = fmt.Sprintf("%s (%s)", observed, why)
		default:
			last = observed
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			res := result(waitResults, map[string]cty.Value{
				"observed": cty.StringVal(last),
				"waited":   cty.NumberFloatVal(time.Since(start).Round(time.Millisecond).Seconds()),
			})
			summary, why := "Timed out waiting for "+w.String(), fmt.Sprintf("Waited %s for %s; last observed: %s.", timeout, w, last)
			if ctx.Err() != nil {
				summary, why = "Stopped waiting for "+w.String(), fmt.Sprintf("Interrupted (%v) while waiting for %s; last observed: %s.", ctx.Err(), w, last)
			}
			return modules.ApplyResponse{Result: res, Diagnostics: hcl.Diagnostics{cfg.Error(w.kind, summary, why)}}
		}
		timer := time.NewTimer(min(gap, remaining))
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
		gap = nextGap(gap, interval)
	}
}

// firstGap is the pause after the first check that finds the condition
// unmet: what a join waits for (a service starting, a network appearing)
// often comes within a second, and the answer costs one round trip.
const firstGap = 100 * time.Millisecond

// nextGap grows the pause between checks by half, up to interval: what
// is awaited is seen at most half the time already waited after it
// happened (doubling: as long again as already waited; an HNS network
// that came 350 ms into hybrid-overlay's wait was seen at 700 ms), for
// about one check more per doubling of the wait.
func nextGap(gap, interval time.Duration) time.Duration {
	return min(gap+gap/2, interval)
}
