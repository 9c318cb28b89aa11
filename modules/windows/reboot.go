package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Reboot restarts a Windows host and waits until it is back, as Ansible's
// win_reboot does: the host is back when a new connection reports a boot
// time other than the one read before the restart, which proves it went
// down (a connection that merely survived would report the old one). It
// exists because some changes only take effect after a restart (the
// Containers feature; machine environment variables for services).
type Reboot struct{}

var (
	_ modules.Module    = Reboot{}
	_ modules.Validator = Reboot{}
)

var rebootResults = []modules.Attribute{
	{Name: "rebooted", Type: cty.Bool, Description: "True: the host restarted and is back."},
	{Name: "elapsed", Type: cty.Number, Description: "Seconds from asking for the restart to the host being back (test_command included)."},
	{Name: "boot_time", Type: cty.String, Description: "The host's new boot time (RFC 3339), as `host.facts.boot_time` reads from the next task on."},
}

// Defaults, as Ansible's win_reboot has them.
const (
	defaultRebootTimeout  = 600
	defaultConnectTimeout = 5
	defaultPreRebootDelay = 2
	defaultRebootMsg      = "Reboot initiated by wsu"
	// maxRebootMsg is the longest message Windows shows (512 UTF-16 units).
	maxRebootMsg = 512
)

// rebootPoll is how often the host is tried while it restarts: soon at
// first (a simulated host is back in milliseconds), then every 5 s.
const (
	rebootPollFirst = 250 * time.Millisecond
	rebootPollMax   = 5 * time.Second
)

func (Reboot) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_reboot",
		Summary: "Restart a Windows host and wait until it is back.",
		Description: "Reads the host's boot time, asks Windows to restart after `pre_reboot_delay` seconds " +
			"(the agent calls InitiateSystemShutdownEx with SeShutdownPrivilege; applications are closed, the " +
			"reason is recorded as a planned restart for an installation), then opens new connections to the " +
			"host (each within `connect_timeout`) until one reports a different boot time: the host went down " +
			"and came back. It then waits `post_reboot_delay` and, when set, runs `test_command` until it exits " +
			"0. All of it must happen within `reboot_timeout`, or the task fails saying what it saw last. Services " +
			"come back as their start type says (automatic ones start).\n\n" +
			"A plan always shows the restart (`! run`): a reboot is an action, not a state. Guard it with " +
			"`when` (for instance `task.NAME.reboot_required` of `win_optional_feature`). After the task the " +
			"engine drops the host's old connection; the next task connects afresh, and `host.facts.boot_time` " +
			"is the new boot time. Not for `connection = \"local\"` on the node itself: the restart would end wsu.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "reboot_timeout", Type: cty.Number, Default: cty.NumberIntVal(defaultRebootTimeout),
				Description: "Seconds the host has to go down, come back and pass `test_command`."},
			{Name: "connect_timeout", Type: cty.Number, Default: cty.NumberIntVal(defaultConnectTimeout),
				Description: "Seconds one connection attempt may take while waiting for the host."},
			{Name: "pre_reboot_delay", Type: cty.Number, Default: cty.NumberIntVal(defaultPreRebootDelay),
				Description: "Seconds Windows waits (showing `msg`) before it shuts down."},
			{Name: "post_reboot_delay", Type: cty.Number, Default: cty.NumberIntVal(0),
				Description: "Seconds to wait once the host is back, before `test_command` (services still starting)."},
			{Name: "test_command", Type: cty.List(cty.String),
				Description: "A program and its arguments (never through a shell) that must exit 0 before the host counts as ready; tried again until `reboot_timeout`. Default: none, a new connection reporting the new boot time is enough."},
			{Name: "msg", Type: cty.String, Default: cty.StringVal(defaultRebootMsg),
				Description: "Message shown to logged-on users and written to the event log."},
		},
		Results: rebootResults,
		Example: `task "reboot" {
  when = task.containers_feature.reboot_required
  win_reboot {
    reboot_timeout = 900
    test_command   = ["C:\\Windows\\System32\\whoami.exe"]
  }
}`,
	}
}

func (Reboot) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	for _, a := range []struct {
		name string
		min  int64
	}{{"reboot_timeout", 1}, {"connect_timeout", 1}, {"pre_reboot_delay", 0}, {"post_reboot_delay", 0}} {
		v := get(cfg, a.name)
		if !v.IsKnown() {
			continue
		}
		if v.IsNull() || v.AsBigFloat().Cmp(cty.NumberIntVal(a.min).AsBigFloat()) < 0 {
			diags = append(diags, cfg.Error(a.name, "Invalid "+a.name, fmt.Sprintf("%s must be at least %d.", a.name, a.min)))
		}
	}
	if v := get(cfg, "pre_reboot_delay"); v.IsKnown() && !v.IsNull() && seconds(v) > 24*time.Hour {
		diags = append(diags, cfg.Error("pre_reboot_delay", "Invalid pre_reboot_delay", "pre_reboot_delay of more than a day is not a reboot this task could wait for."))
	}
	if m, ok := str(get(cfg, "msg")); ok && len([]rune(m)) > maxRebootMsg {
		diags = append(diags, cfg.Error("msg", "Message too long", fmt.Sprintf("Windows shows at most %d characters.", maxRebootMsg)))
	}
	if argv, ok := strList(get(cfg, "test_command")); ok && !isNull(get(cfg, "test_command")) && (len(argv) == 0 || strings.TrimSpace(argv[0]) == "") {
		diags = append(diags, cfg.Error("test_command", "Empty test_command", "test_command needs a program to run (and its arguments), or leave it unset."))
	}
	return diags
}

// rebootable checks what a reboot needs before it is asked for: a Windows
// host that reports its boot time (else nothing could tell it came back)
// and a way to reconnect.
func rebootable(ctx context.Context, h host.Host, redial modules.Redialer, cfg modules.Config) (string, hcl.Diagnostics) {
	if d := onWindows(ctx, h, cfg, ""); d.HasErrors() {
		return "", d
	}
	f, err := h.Facts(ctx)
	if err != nil {
		return "", hcl.Diagnostics{cfg.Error("", "Cannot read host facts", err.Error())}
	}
	if f.BootTime == "" {
		return "", hcl.Diagnostics{cfg.Error("", "Boot time unknown",
			"The host does not report its boot time (host.facts.boot_time), so win_reboot could not tell when it has restarted.")}
	}
	if redial == nil {
		return "", hcl.Diagnostics{cfg.Error("", "Cannot reconnect",
			"win_reboot opens new connections to see the host come back, and this run has no connector to open them with.")}
	}
	return f.BootTime, nil
}

func (Reboot) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	res := result(rebootResults, map[string]cty.Value{
		"rebooted": cty.True, "elapsed": cty.UnknownVal(cty.Number), "boot_time": cty.UnknownVal(cty.String),
	})
	before, d := rebootable(ctx, req.Host, req.Redial, cfg)
	if d.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(rebootResults), Diagnostics: d}
	}
	subject := "reboot"
	if v := get(cfg, "reboot_timeout"); v.IsKnown() {
		subject = fmt.Sprintf("reboot (back within %s)", seconds(v))
	}
	return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Run, Subject: subject,
		Fields: []modules.FieldChange{{Name: "boot_time", Old: cty.StringVal(before), New: cty.UnknownVal(cty.String)}}}}
}

// rebootWait is one wait for the host to come back.
type rebootWait struct {
	redial         modules.Redialer
	before         string
	connectTimeout time.Duration
	deadline       time.Time
}

// probe opens a new connection and reads the boot time. The caller closes
// the host it returns.
func (w rebootWait) probe(ctx context.Context) (host.Host, string, error) {
	cctx, cancel := context.WithTimeout(ctx, w.connectTimeout)
	defer cancel()
	secs := fmt.Sprintf("%ds", int64((w.connectTimeout+time.Second-1)/time.Second))
	h, err := w.redial(cctx, map[string]cty.Value{
		// One attempt per probe: the module does the retrying.
		"connect_timeout":      cty.StringVal(secs),
		"connect_retry_window": cty.StringVal("0s"),
	})
	if err != nil {
		return nil, "", err
	}
	f, err := h.Facts(cctx)
	if err != nil {
		h.Close()
		return nil, "", err
	}
	return h, f.BootTime, nil
}

// back waits until a new connection reports a new boot time and returns
// that connection.
func (w rebootWait) back(ctx context.Context) (host.Host, string, error) {
	last := "no answer yet"
	pause := rebootPollFirst
	for {
		h, bt, err := w.probe(ctx)
		switch {
		case err == nil && bt != w.before:
			return h, bt, nil
		case err == nil:
			h.Close()
			last = "the host still reports the boot time " + w.before + " (it has not gone down yet)"
		default:
			last = err.Error()
		}
		if err := sleepUntil(ctx, pause, w.deadline); err != nil {
			return nil, "", fmt.Errorf("%w; last seen: %s", err, last)
		}
		pause = min(pause*2, rebootPollMax)
	}
}

// errRebootTimeout: the deadline passed.
var errRebootTimeout = errors.New("reboot_timeout passed")

// sleepUntil waits d, or fails when that would pass the deadline or ctx
// ends.
func sleepUntil(ctx context.Context, d time.Duration, deadline time.Time) error {
	if time.Now().Add(d).After(deadline) {
		if d = time.Until(deadline); d <= 0 {
			return errRebootTimeout
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// testReady runs the test command on h until it exits 0 or the deadline.
func (w rebootWait) testReady(ctx context.Context, h host.Host, argv []string) error {
	pause := rebootPollFirst
	for {
		res, err := h.Run(ctx, host.RunRequest{Argv: argv, Timeout: max(time.Until(w.deadline), time.Second)})
		var last string
		switch {
		case err != nil:
			last = err.Error()
		case res.ExitCode == 0 && !res.TimedOut:
			return nil
		default:
			last = fmt.Sprintf("exit code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err := sleepUntil(ctx, pause, w.deadline); err != nil {
			return fmt.Errorf("test_command did not succeed: %w; last: %s", err, last)
		}
		pause = min(pause*2, rebootPollMax)
	}
}

func (Reboot) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: unknownResult(rebootResults), Diagnostics: d}
	}
	if d := requireKnown(cfg, "reboot_timeout", "connect_timeout", "pre_reboot_delay", "post_reboot_delay", "test_command", "msg"); d.HasErrors() {
		return fail(d)
	}
	before, d := rebootable(ctx, req.Host, req.Redial, cfg)
	if d.HasErrors() {
		return fail(d)
	}
	msg, _ := str(get(cfg, "msg"))
	argv, _ := strList(get(cfg, "test_command"))
	start := time.Now()
	w := rebootWait{
		redial:         req.Redial,
		before:         before,
		connectTimeout: seconds(get(cfg, "connect_timeout")),
		deadline:       start.Add(seconds(get(cfg, "reboot_timeout"))),
	}
	rb, err := host.AsRebooter(req.Host)
	if err == nil {
		err = rb.Reboot(ctx, host.RebootRequest{Delay: seconds(get(cfg, "pre_reboot_delay")), Message: msg})
	}
	// A host going down at once may cut the answer off: that is the
	// reboot happening, and coming back will prove it.
	if err != nil && !errors.Is(err, host.ErrConnectionLost) {
		return fail(hostError(cfg, "", "Cannot reboot", err))
	}
	h, bootTime, err := w.back(ctx)
	if err != nil {
		return fail(hcl.Diagnostics{cfg.Error("reboot_timeout", "Host did not come back",
			fmt.Sprintf("Asked the host to restart, and no new connection reported a new boot time within %s: %v.", time.Duration(seconds(get(cfg, "reboot_timeout"))), err))})
	}
	defer h.Close()
	if err := sleepUntil(ctx, seconds(get(cfg, "post_reboot_delay")), w.deadline); err != nil {
		return fail(hcl.Diagnostics{cfg.Error("post_reboot_delay", "Host not ready", "The host came back, but post_reboot_delay reaches past reboot_timeout.")})
	}
	if len(argv) > 0 {
		if err := w.testReady(ctx, h, argv); err != nil {
			return fail(hcl.Diagnostics{cfg.Error("test_command", "Host not ready after the reboot", fmt.Sprintf("The host came back (boot time %s), but %v.", bootTime, err))})
		}
	}
	res := result(rebootResults, map[string]cty.Value{
		"rebooted":  cty.True,
		"elapsed":   cty.NumberFloatVal(time.Since(start).Round(time.Millisecond).Seconds()),
		"boot_time": cty.StringVal(bootTime),
	})
	return modules.ApplyResponse{Result: res, Reconnect: true}
}
