package windows

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// ManagedDescription is the description win_service gives a service when
// the task sets none. Removal (deconfigure) finds the services wsu
// installed by this marker, so only services carrying it are deleted there.
const ManagedDescription = "Managed by wsu"

// defaultResetPeriod is how long without failures resets the failure count
// when recovery sets no reset_period: one day, as the Services console
// proposes.
const defaultResetPeriod = 86400

// Service manages a Windows service: its configuration, failure actions
// and run state.
type Service struct{}

var (
	_ modules.Module    = Service{}
	_ modules.Validator = Service{}
)

var recoveryType = cty.ObjectWithOptionalAttrs(map[string]cty.Type{
	"restart_delays": cty.List(cty.Number),
	"reset_period":   cty.Number,
}, []string{"reset_period"})

// recoveryValueType is a recovery object as config and plans hold it.
var recoveryValueType = cty.Object(map[string]cty.Type{
	"restart_delays": cty.List(cty.Number),
	"reset_period":   cty.Number,
})

var serviceResults = []modules.Attribute{
	{Name: "name", Type: cty.String, Description: "The service name."},
	{Name: "state", Type: cty.String, Description: "The run state (`\"running\"`, `\"stopped\"`); null when the service is absent."},
}

func (Service) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_service",
		Summary: "Create, configure, start, stop, restart or delete a Windows service.",
		Description: "Makes a service exist with exactly the given binary, arguments, names, start " +
			"mode and dependencies, and brings it to `state`. The plan lists only the settings " +
			"that differ. A new `path` or `args` takes effect at the next start, so when either " +
			"changes on a running service the plan says the service will be restarted. " +
			"`state = \"restarted\"` always restarts (or starts) the service.\n\n" +
			"The SCM refuses to stop a service while services depending on it run, so stopping one " +
			"(a restart, or `state = \"stopped\"`) stops its running dependents first, deepest " +
			"first. A restart starts them again after the service, in dependency order, and the " +
			"plan lists them all as restarted; `state = \"stopped\"` leaves them stopped (starting " +
			"one would start the service again) and the plan lists them as `dependents_stopped`. " +
			"Dependents that were not running are left alone. If a stop fails midway, what was " +
			"stopped is started again and the task fails.\n\n" +
			"Services wsu manages carry a marker: with no `description`, the description is " +
			"`\"" + ManagedDescription + "\"`, which is how the removal playbook recognises the " +
			"services it may delete. A custom description replaces the marker.\n\n" +
			"`recovery` sets the failure actions (restart after a delay) as a separate step. " +
			"Platforms that cannot set them (Wine) fail the task with an error saying so, rather " +
			"than pretending. With `state = \"absent\"` the service is stopped and deleted, waiting " +
			"until its process has exited, and the other arguments are ignored. " +
			"`only_if_managed = true` limits the task to services carrying the marker (or not there yet): " +
			"a service of the same name someone else installed is neither deleted nor reconfigured, only warned about.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true,
				Description: "Service name (the key name, not the display name); at most 256 characters, no slashes."},
			{Name: "path", Type: cty.String,
				Description: "Absolute Windows path of the service binary. Required unless `state = \"absent\"`; spaces are quoted for you."},
			{Name: "args", Type: cty.List(cty.String),
				Description: "Arguments passed to the binary, one element each (no quoting needed)."},
			{Name: "display_name", Type: cty.String,
				Description: "Name shown in the Services console; defaults to `name`."},
			{Name: "description", Type: cty.String,
				Description: "Description; defaults to `\"" + ManagedDescription + "\"`, the marker removal relies on."},
			{Name: "start_mode", Type: cty.String, Default: cty.StringVal("automatic"),
				Description: "`\"automatic\"`, `\"delayed_automatic\"`, `\"manual\"` or `\"disabled\"`."},
			{Name: "dependencies", Type: cty.List(cty.String),
				Description: "Services that must run before this one (compared case-insensitively, in any order)."},
			{Name: "recovery", Type: recoveryType,
				Description: "Failure actions: `restart_delays`, seconds to wait before restarting after the first, second, ... failure (the last repeats), and `reset_period`, seconds without failure after which the count starts again (default one day). Unset: left as it is."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("running"),
				Description: "`\"running\"`, `\"stopped\"`, `\"restarted\"` (always restarts) or `\"absent\"` (stop and delete)."},
			{Name: "only_if_managed", Type: cty.Bool, Default: cty.False,
				Description: "Act on the service only if it is missing or its description starts with `\"" + ManagedDescription + "\"`; a service of the same name that wsu did not create is left alone (not deleted, not reconfigured), with a warning."},
		},
		Results: serviceResults,
		Example: `task "kubelet_service" {
  win_service {
    name         = "kubelet"
    path         = "C:\\k\\kubelet.exe"
    args         = ["--config=C:\\k\\kubelet.conf", "--windows-service", "--node-ip=${host.facts.ipv4}"]
    dependencies = ["containerd"]
    recovery     = { restart_delays = [5, 10, 30] }
  }
}`,
	}
}

var (
	serviceStates = []string{"running", "stopped", "restarted", "absent"}
	startModes    = []string{"automatic", "delayed_automatic", "manual", "disabled"}
)

func (Service) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateServiceName(cfg, "name")
	diags = append(diags, validateEnum(cfg, "state", serviceStates...)...)
	diags = append(diags, validateEnum(cfg, "start_mode", startModes...)...)
	diags = append(diags, validatePath(cfg, "path")...)
	state, stateOK := str(get(cfg, "state"))
	// Without path the task manages only the run state of an existing
	// service (a handler's restart); configuration needs the binary too.
	if isNull(get(cfg, "path")) {
		for _, a := range []string{"args", "display_name", "description", "dependencies", "recovery"} {
			if _, set := cfg.Ranges[a]; set && !isNull(get(cfg, a)) && stateOK && state != "absent" {
				diags = append(diags, cfg.Error(a, "Missing path",
					fmt.Sprintf("%s configures the service, which needs path (the service binary) too. Without path a task only starts, stops or restarts an existing service.", a)))
			}
		}
	}
	if mode, ok := str(get(cfg, "start_mode")); ok && mode == "disabled" && stateOK && (state == "running" || state == "restarted") {
		diags = append(diags, cfg.Error("start_mode", "Conflicting start_mode and state",
			fmt.Sprintf("A disabled service cannot be started; state = %q needs another start_mode (or state = \"stopped\").", state)))
	}
	if args := get(cfg, "args"); args.IsKnown() && !args.IsNull() {
		for i, el := range args.AsValueSlice() {
			if isNull(el) {
				diags = append(diags, cfg.Error("args", "Null argument", fmt.Sprintf("args[%d] is null.", i)))
			}
		}
	}
	if dn, ok := str(get(cfg, "display_name")); ok && len([]rune(dn)) > 256 {
		diags = append(diags, cfg.Error("display_name", "Display name too long", "display_name is limited to 256 characters."))
	}
	name, nameOK := str(get(cfg, "name"))
	if deps := get(cfg, "dependencies"); deps.IsKnown() && !deps.IsNull() {
		for i, el := range deps.AsValueSlice() {
			if isNull(el) {
				diags = append(diags, cfg.Error("dependencies", "Null dependency", fmt.Sprintf("dependencies[%d] is null.", i)))
				continue
			}
			d, ok := str(el)
			if !ok {
				continue
			}
			if why := checkServiceName(strings.TrimPrefix(d, "+")); why != "" {
				diags = append(diags, cfg.Error("dependencies", "Invalid dependency", fmt.Sprintf("dependencies[%d] %q %s.", i, d, why)))
			} else if nameOK && strings.EqualFold(d, name) {
				diags = append(diags, cfg.Error("dependencies", "Service depends on itself", fmt.Sprintf("%s cannot depend on itself.", name)))
			}
		}
	}
	return append(diags, validateRecovery(cfg)...)
}

// Windows keeps restart delays in milliseconds and the reset period in
// seconds, both as 32-bit counts.
const (
	maxDelaySeconds = math.MaxUint32 / 1000
	maxResetSeconds = math.MaxUint32
)

func validateRecovery(cfg modules.Config) hcl.Diagnostics {
	r := get(cfg, "recovery")
	if !r.IsKnown() || r.IsNull() {
		return nil
	}
	var diags hcl.Diagnostics
	delays := r.GetAttr("restart_delays")
	if isNull(delays) {
		diags = append(diags, cfg.Error("recovery", "Missing restart_delays",
			"recovery needs restart_delays, the seconds to wait before each restart (use [] for no restarts)."))
	} else if delays.IsKnown() {
		for i, d := range delays.AsValueSlice() {
			if _, ok := wholeSeconds(d, maxDelaySeconds); !ok && d.IsKnown() {
				diags = append(diags, cfg.Error("recovery", "Invalid restart delay",
					fmt.Sprintf("restart_delays[%d] must be a whole number of seconds between 0 and %d.", i, maxDelaySeconds)))
			}
		}
	}
	if p := r.GetAttr("reset_period"); p.IsKnown() && !p.IsNull() {
		if _, ok := wholeSeconds(p, maxResetSeconds); !ok {
			diags = append(diags, cfg.Error("recovery", "Invalid reset_period",
				fmt.Sprintf("reset_period must be a whole number of seconds between 0 and %d.", int64(maxResetSeconds))))
		}
	}
	return diags
}

// wholeSeconds reads a known whole number in [0, max].
func wholeSeconds(v cty.Value, max int64) (int64, bool) {
	if !v.IsKnown() || v.IsNull() {
		return 0, false
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i < 0 || i > max {
		return 0, false
	}
	return i, true
}

// stateOnly is a task without path: it manages the run state of an
// existing service and leaves its configuration alone.
func stateOnly(cfg modules.Config) bool { return isNull(get(cfg, "path")) }

// missingService refuses to manage the state of a service that is not there.
func missingService(cfg modules.Config, name string) hcl.Diagnostics {
	return hcl.Diagnostics{cfg.Error("name", "Service not found",
		fmt.Sprintf("There is no service %q on this host; give path (and its configuration) to create it.", name))}
}

// serviceFields is the order a plan lists configuration fields in.
var serviceFields = []string{"path", "args", "display_name", "description", "start_mode", "dependencies", "recovery"}

// wanted is the desired value of every configuration field, as far as it is
// known. A field the task leaves unmanaged (recovery) is missing.
func wanted(cfg modules.Config) map[string]cty.Value {
	if stateOnly(cfg) {
		return map[string]cty.Value{}
	}
	nameV := get(cfg, "name")
	want := map[string]cty.Value{
		"path":       get(cfg, "path"),
		"start_mode": get(cfg, "start_mode"),
	}
	for _, list := range []string{"args", "dependencies"} {
		want[list] = get(cfg, list)
		if isNull(want[list]) {
			want[list] = cty.ListValEmpty(cty.String)
		}
	}
	want["display_name"] = get(cfg, "display_name")
	if s, ok := str(want["display_name"]); isNull(want["display_name"]) || (ok && s == "") {
		want["display_name"] = nameV
	}
	want["description"] = get(cfg, "description")
	if s, ok := str(want["description"]); isNull(want["description"]) || (ok && s == "") {
		want["description"] = cty.StringVal(ManagedDescription)
	}
	if r := get(cfg, "recovery"); !isNull(r) {
		want["recovery"] = cty.UnknownVal(recoveryValueType)
		if r.IsKnown() {
			reset := r.GetAttr("reset_period")
			if isNull(reset) {
				reset = cty.NumberIntVal(defaultResetPeriod)
			}
			delays := r.GetAttr("restart_delays")
			if delays.IsKnown() && !delays.IsNull() && delays.LengthInt() == 0 {
				delays = cty.ListValEmpty(cty.Number)
			}
			want["recovery"] = cty.ObjectVal(map[string]cty.Value{"restart_delays": delays, "reset_period": reset})
		}
	}
	return want
}

// observedRecovery is a service's failure actions as the host shows them:
// with the service query when the platform reports them, else where the SCM
// keeps them, the FailureActions value of the service's registry key. other
// is set when actions besides restarts (reboot, run a program) are configured.
type observedRecovery struct {
	value cty.Value
	other bool
}

// Registry values holding failure actions, in the order they are trusted:
// the SCM's own, then the copy wsu records after setting them on a
// platform that keeps no FailureActions value (the simulated host), so
// that a second run there sees them too.
const (
	scmFailureActions = "FailureActions"
	wsuFailureActions = "WsuFailureActions"
)

func serviceKey(name string) string {
	return `HKLM\SYSTEM\CurrentControlSet\Services\` + name
}

func readRecovery(ctx context.Context, h host.Host, name string) (observedRecovery, error) {
	for _, value := range []string{scmFailureActions, wsuFailureActions} {
		rv, err := h.RegistryGet(ctx, serviceKey(name), value)
		switch {
		case errors.Is(err, host.ErrNotSupported):
			// Unobservable: the plan shows it as unknown and apply sets
			// it, which reports whether the platform can.
			return observedRecovery{value: cty.UnknownVal(recoveryValueType)}, nil
		case err != nil:
			return observedRecovery{}, err
		case !rv.Exists || rv.Type != host.RegBinary:
			continue
		}
		rec, other, ok := decodeFailureActions(rv.Binary)
		if !ok {
			return observedRecovery{value: cty.NullVal(recoveryValueType), other: true}, nil
		}
		return observedRecovery{value: recoveryVal(rec), other: other}, nil
	}
	return observedRecovery{value: cty.NullVal(recoveryValueType)}, nil
}

// recordRecovery keeps wsu's copy of the failure actions just set, unless
// the platform shows the SCM's own.
func recordRecovery(ctx context.Context, h host.Host, name string, r host.ServiceRecovery) error {
	rv, err := h.RegistryGet(ctx, serviceKey(name), scmFailureActions)
	if err != nil || rv.Exists {
		return err
	}
	return h.RegistrySet(ctx, serviceKey(name), wsuFailureActions,
		host.RegistryValue{Type: host.RegBinary, Binary: encodeFailureActions(r)})
}

// The SCM's serialized SERVICE_FAILURE_ACTIONS: reset period (s), reboot
// message, command, action count and actions offset, each a little-endian
// uint32, then (type, delay in ms) pairs. Type 1 is SC_ACTION_RESTART;
// type 0 (none) only pads.
const (
	faHeader  = 20
	faAction  = 8
	faRestart = 1
	faNone    = 0
)

func decodeFailureActions(b []byte) (rec host.ServiceRecovery, other, ok bool) {
	if len(b) < faHeader {
		return rec, false, false
	}
	u32 := binary.LittleEndian.Uint32
	n := int(u32(b[12:]))
	if n > (len(b)-faHeader)/faAction {
		return rec, false, false
	}
	rec.ResetPeriod = time.Duration(u32(b[0:])) * time.Second
	rec.RestartDelays = []time.Duration{}
	for i := range n {
		a := b[faHeader+i*faAction:]
		switch u32(a) {
		case faNone:
		case faRestart:
			rec.RestartDelays = append(rec.RestartDelays, time.Duration(u32(a[4:]))*time.Millisecond)
		default:
			other = true
		}
	}
	return rec, other, true
}

func encodeFailureActions(r host.ServiceRecovery) []byte {
	b := make([]byte, faHeader+faAction*len(r.RestartDelays))
	put := binary.LittleEndian.PutUint32
	put(b[0:], uint32(r.ResetPeriod/time.Second))
	put(b[12:], uint32(len(r.RestartDelays)))
	put(b[16:], faHeader)
	for i, d := range r.RestartDelays {
		put(b[faHeader+i*faAction:], faRestart)
		put(b[faHeader+i*faAction+4:], uint32(d/time.Millisecond))
	}
	return b
}

func recoveryVal(r host.ServiceRecovery) cty.Value {
	delays := make([]cty.Value, len(r.RestartDelays))
	for i, d := range r.RestartDelays {
		delays[i] = cty.NumberFloatVal(d.Seconds())
		if d%time.Second == 0 {
			delays[i] = cty.NumberIntVal(int64(d / time.Second))
		}
	}
	list := cty.ListValEmpty(cty.Number)
	if len(delays) > 0 {
		list = cty.ListVal(delays)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"restart_delays": list,
		"reset_period":   cty.NumberIntVal(int64(r.ResetPeriod / time.Second)),
	})
}

// observedFields is the service's configuration as the host reports it.
func observedFields(info host.ServiceInfo, rec observedRecovery) map[string]cty.Value {
	if !info.Exists {
		have := map[string]cty.Value{}
		for _, f := range serviceFields {
			have[f] = cty.NullVal(cty.String)
		}
		have["args"], have["dependencies"] = cty.NullVal(cty.List(cty.String)), cty.NullVal(cty.List(cty.String))
		have["recovery"] = cty.NullVal(recoveryValueType)
		return have
	}
	c := info.Config
	return map[string]cty.Value{
		"path":         cty.StringVal(c.BinaryPath),
		"args":         listVal(c.Args),
		"display_name": cty.StringVal(c.DisplayName),
		"description":  cty.StringVal(c.Description),
		"start_mode":   cty.StringVal(string(c.StartType)),
		"dependencies": listVal(c.Dependencies),
		"recovery":     rec.value,
	}
}

// sameField compares one known desired value with the observed one as
// Windows would: paths and dependency names case-insensitively.
func sameField(name string, have, want cty.Value, rec observedRecovery) bool {
	if !have.IsWhollyKnown() || !want.IsWhollyKnown() || have.IsNull() || want.IsNull() {
		return false
	}
	switch name {
	case "path":
		return samePath(have.AsString(), want.AsString())
	case "dependencies":
		h, _ := strList(have)
		w, _ := strList(want)
		return sameSet(h, w)
	case "recovery":
		return !rec.other && have.Equals(want).True()
	}
	return have.Equals(want).True()
}

func sameSet(a, b []string) bool {
	count := map[string]int{}
	for _, s := range a {
		count[strings.ToLower(s)]++
	}
	for _, s := range b {
		count[strings.ToLower(s)]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// serviceDiff is what it takes to bring a service to the desired state;
// Plan renders it and Apply carries it out, so the two cannot disagree.
type serviceDiff struct {
	fields         []modules.FieldChange
	create         bool
	updateConfig   bool
	setRecovery    bool
	stop, start    bool
	restart        bool // stop and start: shown as Restarts
	stateField     *modules.FieldChange
	resultingState cty.Value
	// stops is what stopping the service takes down, in stop order: its
	// running dependents, then itself (stopOrder). A restart starts them
	// all again; state = "stopped" leaves them stopped.
	stops []string
}

// dependentsField lists the running dependents that state = "stopped"
// stops with the service and leaves stopped (starting one would start
// the service again).
const dependentsField = "dependents_stopped"

// withDependents completes a diff that stops the service with the running
// services that depend on it, which must stop first. Plan and Apply both
// call it after diffService, so the restarts a plan shows are the ones
// Apply carries out. It asks the host only when the diff stops the service.
func withDependents(ctx context.Context, h host.Host, cfg modules.Config, name string, d serviceDiff) (serviceDiff, hcl.Diagnostics) {
	if !d.stop {
		return d, nil
	}
	order, err := stopOrder(ctx, h, name)
	if err != nil {
		return d, hostError(cfg, "state", "Cannot list dependent services", err)
	}
	d.stops = order
	if deps := order[:len(order)-1]; !d.restart && len(deps) > 0 {
		d.fields = append(d.fields, modules.FieldChange{Name: dependentsField, Old: cty.NullVal(cty.List(cty.String)), New: listVal(deps)})
	}
	return d, nil
}

func (d serviceDiff) empty() bool {
	return len(d.fields) == 0 && !d.stop && !d.start && d.stateField == nil
}

func diffService(info host.ServiceInfo, rec observedRecovery, want map[string]cty.Value, state string) serviceDiff {
	d := serviceDiff{create: !info.Exists}
	have := observedFields(info, rec)
	binaryChanged := false
	for _, f := range serviceFields {
		w, managed := want[f]
		if !managed || sameField(f, have[f], w, rec) {
			continue
		}
		d.fields = append(d.fields, modules.FieldChange{Name: f, Old: have[f], New: w})
		if f == "recovery" {
			d.setRecovery = true
		} else {
			d.updateConfig = true
		}
		binaryChanged = binaryChanged || f == "path" || f == "args"
	}
	d.updateConfig = d.updateConfig && info.Exists

	observed := cty.NullVal(cty.String)
	if info.Exists {
		observed = cty.StringVal(string(info.State))
	}
	running := info.Exists && (info.State == host.ServiceRunning || info.State == host.ServiceStartPending)
	switch state {
	case "stopped":
		d.resultingState = cty.StringVal("stopped")
		if info.Exists && info.State != host.ServiceStopped {
			d.stop = true
		}
		if !info.Exists || info.State != host.ServiceStopped {
			d.stateField = &modules.FieldChange{Name: "state", Old: observed, New: d.resultingState}
		}
	default: // running, restarted
		d.resultingState = cty.StringVal("running")
		switch {
		case running && (state == "restarted" || binaryChanged):
			d.restart = true
		case info.Exists && info.State == host.ServicePaused:
			d.restart = true // there is no resume in the Host API
		case !running:
			d.start = true
			d.stateField = &modules.FieldChange{Name: "state", Old: observed, New: d.resultingState}
		}
		d.stop, d.start = d.stop || d.restart, d.start || d.restart
	}
	if d.stateField != nil {
		d.fields = append(d.fields, *d.stateField)
	}
	return d
}

// desiredConfig is the full basic configuration; every value is known.
func desiredConfig(cfg modules.Config, want map[string]cty.Value) host.ServiceConfig {
	name, _ := str(get(cfg, "name"))
	sc := host.ServiceConfig{Name: name}
	sc.BinaryPath, _ = str(want["path"])
	sc.Args, _ = strList(want["args"])
	sc.DisplayName, _ = str(want["display_name"])
	sc.Description, _ = str(want["description"])
	mode, _ := str(want["start_mode"])
	sc.StartType = host.StartType(mode)
	sc.Dependencies, _ = strList(want["dependencies"])
	return sc
}

func desiredRecovery(want cty.Value) host.ServiceRecovery {
	var r host.ServiceRecovery
	reset, _ := wholeSeconds(want.GetAttr("reset_period"), maxResetSeconds)
	r.ResetPeriod = time.Duration(reset) * time.Second
	r.RestartDelays = []time.Duration{}
	for _, d := range want.GetAttr("restart_delays").AsValueSlice() {
		s, _ := wholeSeconds(d, maxDelaySeconds)
		r.RestartDelays = append(r.RestartDelays, time.Duration(s)*time.Second)
	}
	return r
}

// inspect reads everything diffService needs.
func inspect(ctx context.Context, h host.Host, cfg modules.Config, name string, want map[string]cty.Value) (host.ServiceInfo, observedRecovery, hcl.Diagnostics) {
	info, err := h.QueryService(ctx, name)
	if err != nil {
		return info, observedRecovery{}, hostError(cfg, "name", "Cannot query service", err)
	}
	rec := observedRecovery{value: cty.NullVal(recoveryValueType)}
	if _, managed := want["recovery"]; managed && info.Exists {
		if r := info.Recovery; r != nil {
			// Reported with the query: no registry reads.
			return info, observedRecovery{value: recoveryVal(r.ServiceRecovery), other: r.Other}, nil
		}
		if rec, err = readRecovery(ctx, h, name); err != nil {
			return info, rec, hostError(cfg, "recovery", "Cannot read recovery actions", err)
		}
	}
	return info, rec, nil
}

func (m Service) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	if diags := m.Validate(modules.ValidateRequest{Config: cfg}); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(serviceResults), Diagnostics: diags}
	}
	nameV := get(cfg, "name")
	name, nameOK := str(nameV)
	state, stateOK := str(get(cfg, "state"))
	res := func(state cty.Value) cty.Value {
		return result(serviceResults, map[string]cty.Value{"name": nameV, "state": state})
	}
	if !nameOK || !stateOK {
		// Which service, or what should become of it, is not known: list
		// what the task sets, against values not read yet.
		subject := knownAfterApply
		if nameOK {
			subject = name
		}
		if stateOK && state == "absent" {
			return modules.PlanResponse{
				Change: &modules.Change{Action: modules.Delete, Subject: subject, Fields: []modules.FieldChange{
					{Name: "state", Old: cty.UnknownVal(cty.String), New: cty.NullVal(cty.String)},
				}},
				Result: res(cty.NullVal(cty.String)),
			}
		}
		want := wanted(cfg)
		var fields []modules.FieldChange
		for _, f := range serviceFields {
			if w, ok := want[f]; ok {
				fields = append(fields, modules.FieldChange{Name: f, Old: cty.UnknownVal(w.Type()), New: w})
			}
		}
		fields = append(fields, modules.FieldChange{Name: "state", Old: cty.UnknownVal(cty.String), New: get(cfg, "state")})
		return modules.PlanResponse{
			Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: fields},
			Result: res(cty.UnknownVal(cty.String)),
		}
	}
	if req.Host == nil {
		return modules.PlanResponse{Result: res(cty.UnknownVal(cty.String)), Diagnostics: hcl.Diagnostics{cfg.Error("name", "No host", "This module needs a host to act on.")}}
	}

	if state == "absent" {
		change, st, diags := absent(ctx, req.Host, cfg, name, false)
		return modules.PlanResponse{Change: change, Result: res(st), Diagnostics: diags}
	}

	want := wanted(cfg)
	info, rec, diags := inspect(ctx, req.Host, cfg, name, want)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res(cty.UnknownVal(cty.String)), Diagnostics: diags}
	}
	if info.Exists && !deletable(cfg, info) {
		return modules.PlanResponse{Result: res(cty.StringVal(string(info.State))), Diagnostics: notManaged(cfg, name, info)}
	}
	if !info.Exists && stateOnly(cfg) {
		if req.Pending {
			// A dry run in which an earlier task creates the service (a
			// handler restarting it): plan the state change; apply still
			// refuses if the service is not there by then.
			return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: name, Restarts: []string{name},
				Fields: []modules.FieldChange{{Name: "state", Old: cty.StringVal("(created earlier in this plan)"), New: cty.StringVal(state)}}},
				Result: res(cty.UnknownVal(cty.String))}
		}
		return modules.PlanResponse{Result: res(cty.UnknownVal(cty.String)), Diagnostics: missingService(cfg, name)}
	}
	d, diags := withDependents(ctx, req.Host, cfg, name, diffService(info, rec, want, state))
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res(cty.UnknownVal(cty.String)), Diagnostics: diags}
	}
	if d.empty() {
		return modules.PlanResponse{Result: res(cty.StringVal(string(info.State)))}
	}
	change := &modules.Change{Action: modules.Update, Subject: name, Fields: d.fields}
	if d.create {
		change.Action = modules.Create
	}
	if d.restart {
		change.Restarts = d.stops
	}
	return modules.PlanResponse{Change: change, Result: res(d.resultingState)}
}

func (m Service) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	diags := m.Validate(modules.ValidateRequest{Config: cfg})
	diags = append(diags, requireKnown(cfg, "name", "path", "args", "display_name", "description", "start_mode", "dependencies", "recovery", "state", "only_if_managed")...)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(serviceResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	state, _ := str(get(cfg, "state"))
	h := req.Host
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: unknownResult(serviceResults), Diagnostics: d}
	}
	if h == nil {
		return fail(hcl.Diagnostics{cfg.Error("name", "No host", "This module needs a host to act on.")})
	}

	if state == "absent" {
		_, st, diags := absent(ctx, h, cfg, name, true)
		if diags.HasErrors() {
			return fail(diags)
		}
		return modules.ApplyResponse{Result: result(serviceResults, map[string]cty.Value{"name": cty.StringVal(name), "state": st}), Diagnostics: diags}
	}

	want := wanted(cfg)
	info, rec, diags := inspect(ctx, h, cfg, name, want)
	if diags.HasErrors() {
		return fail(diags)
	}
	if info.Exists && !deletable(cfg, info) {
		return modules.ApplyResponse{Result: result(serviceResults, map[string]cty.Value{"name": cty.StringVal(name), "state": cty.StringVal(string(info.State))}), Diagnostics: notManaged(cfg, name, info)}
	}
	if !info.Exists && stateOnly(cfg) {
		return fail(missingService(cfg, name))
	}
	d, diags := withDependents(ctx, h, cfg, name, diffService(info, rec, want, state))
	if diags.HasErrors() {
		return fail(diags)
	}
	sc := desiredConfig(cfg, want)
	switch {
	case d.create:
		if err := h.CreateService(ctx, sc); err != nil {
			return fail(hostError(cfg, "name", "Cannot create service", err))
		}
	case d.updateConfig:
		if err := h.UpdateService(ctx, sc); err != nil {
			return fail(hostError(cfg, "name", "Cannot update service", err))
		}
	}
	// A recovery failure is reported, but the run state is still brought
	// about: a service left stopped over its failure actions helps nobody.
	if d.setRecovery {
		r := desiredRecovery(want["recovery"])
		if err := h.SetServiceRecovery(ctx, name, r); errors.Is(err, host.ErrNotSupported) {
			diags = append(diags, cfg.Error("recovery", "Recovery actions not supported",
				fmt.Sprintf("recovery actions are not supported on this platform, so %s will not be restarted when it fails (%v). Remove recovery from the task to run without them.", name, err)))
		} else if err != nil {
			diags = append(diags, hostError(cfg, "recovery", "Cannot set recovery actions", err)...)
		} else if err := recordRecovery(ctx, h, name, r); err != nil && !errors.Is(err, host.ErrNotSupported) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Cannot record recovery actions",
				Detail:   fmt.Sprintf("The recovery actions of %s are set, but keeping wsu's copy of them failed (%v); the next plan may list recovery again.", name, err),
				Subject:  cfg.Range("recovery"),
			})
		}
	}
	if sd := runState(ctx, h, cfg, name, d); sd.HasErrors() {
		return fail(append(diags, sd...))
	}
	return modules.ApplyResponse{
		Result:      result(serviceResults, map[string]cty.Value{"name": cty.StringVal(name), "state": d.resultingState}),
		Diagnostics: diags,
	}
}

// runState stops and starts what d says. Stopping takes the running
// dependents down first (d.stops); a restart starts the service, then them,
// in dependency order. Whatever fails, the services stopped are started
// again where the task wants the service running, and every failure is
// reported: no node is left half-stopped as if the task had succeeded.
func runState(ctx context.Context, h host.Host, cfg modules.Config, name string, d serviceDiff) hcl.Diagnostics {
	stopped, err := stopInOrder(ctx, h, d.stops)
	if err != nil {
		return append(hostError(cfg, "state", "Cannot stop service", err), startAgain(ctx, h, cfg, "state", stopped)...)
	}
	if !d.start {
		return nil
	}
	var diags hcl.Diagnostics
	if err := startAndWait(ctx, h, name); err != nil {
		diags = hostError(cfg, "state", "Cannot start service", err)
	}
	dependents := slices.DeleteFunc(stopped, func(s string) bool { return strings.EqualFold(s, name) })
	return append(diags, startAgain(ctx, h, cfg, "state", dependents)...)
}

// absent is state = "absent" for Plan and, with apply, Apply: the change
// (nil when there is no service), the state the result reports and the
// diagnostics. A service only_if_managed protects is left with a warning.
func absent(ctx context.Context, h host.Host, cfg modules.Config, name string, apply bool) (*modules.Change, cty.Value, hcl.Diagnostics) {
	none := cty.NullVal(cty.String)
	info, err := h.QueryService(ctx, name)
	if err != nil {
		return nil, none, hostError(cfg, "name", "Cannot query service", err)
	}
	if !info.Exists {
		return nil, none, nil
	}
	if !deletable(cfg, info) {
		return nil, cty.StringVal(string(info.State)), notManaged(cfg, name, info)
	}
	change := &modules.Change{Action: modules.Delete, Subject: name, Fields: []modules.FieldChange{
		{Name: "path", Old: cty.StringVal(info.Config.BinaryPath), New: none},
		{Name: "state", Old: cty.StringVal(string(info.State)), New: none},
	}}
	if !apply {
		return change, none, nil
	}
	if err := h.DeleteService(ctx, name, serviceTimeout); err != nil {
		return nil, none, hostError(cfg, "name", "Cannot delete service", err)
	}
	// Windows deletes the service's key with it; elsewhere drop wsu's copy
	// of the failure actions. Best effort: a stale copy is ignored by a
	// service that does not exist.
	_ = h.RegistryDelete(ctx, serviceKey(name), wsuFailureActions)
	return change, none, nil
}

// deletable: may the task delete or reconfigure this existing service?
// Always, unless only_if_managed asks for wsu's marker (the removal
// playbook: an admin's own containerd of the same name is not wsu's to
// delete; join's exporter: a site's own windows_exporter is not wsu's to
// take over).
func deletable(cfg modules.Config, info host.ServiceInfo) bool {
	managed, _ := boolAttr(cfg, "only_if_managed")
	return !managed || strings.HasPrefix(info.Config.Description, ManagedDescription)
}

func notManaged(cfg modules.Config, name string, info host.ServiceInfo) hcl.Diagnostics {
	return hcl.Diagnostics{{
		Severity: hcl.DiagWarning,
		Summary:  "Service not managed by wsu",
		Detail: fmt.Sprintf("Service %s exists but its description (%q) lacks wsu's marker %q, so wsu did not create it and leaves it as it is. Delete it by hand, or drop only_if_managed, if wsu should delete or take it over.",
			name, info.Config.Description, ManagedDescription),
		Subject: cfg.Range("only_if_managed"),
	}}
}
