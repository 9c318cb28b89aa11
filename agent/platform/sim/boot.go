package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
)

// The simulated host's power cycle and Windows optional features.
//
// A reboot (host.Rebooter) is accepted at once and happens in the
// background, as InitiateSystemShutdownEx does: after the delay every
// process ends (Shutdown), then, in one locked step, the boot time moves
// on, pending feature changes take effect and the services whose start
// type is automatic (delayed or not) start again, dependencies first.
// A client can never see the new boot time with the services not yet
// started. Then Halted closes: the agent serving this Host ends its
// connection (agent/agentcmd), as a real machine going down cuts it.
//
// Limits of the stand-in: only the agent whose Host was asked to reboot
// drops its connection (other agents on the same root keep theirs); the
// machine is never unreachable (a connection made meanwhile sees the old
// boot time until the boot step commits); HNS networks survive (on Windows
// a network HNS does not persist is gone, and hybrid-overlay makes it
// again); a service that cannot start at boot is recorded in the boot
// table (BootFailures) where Windows writes an event log entry.

// Table files of this part.
const (
	tBoot     = "boot"
	tFeatures = "features"
)

// bootTable is the host's power history.
type bootTable struct {
	// BootTime is when the host last started (RFC 3339, UTC).
	BootTime string `json:"boot_time"`
	// Boots counts the reboots since the root was created.
	Boots int `json:"boots"`
	// Failures are the automatic services the last boot could not start.
	Failures map[string]string `json:"failures,omitempty"`
}

// featureTable holds the optional features by lower-cased name.
type featureTable struct {
	Features map[string]*host.FeatureInfo `json:"features"`
}

// defaultFeatures is what a fresh simulated host lists. Containers is on,
// so a sim host joins without a reboot unless a test turns it off
// (SetOptionalFeature); a fresh Windows Server has it off.
func defaultFeatures() map[string]*host.FeatureInfo {
	return map[string]*host.FeatureInfo{
		"containers":        {Name: "Containers", State: host.FeatureEnabled, RestartPossible: true},
		"microsoft-hyper-v": {Name: "Microsoft-Hyper-V", State: host.FeatureDisabled, RestartPossible: true},
	}
}

// ContainersFeature is the optional feature HNS needs.
const ContainersFeature = "Containers"

// ErrHNSUnavailable is what HNS calls fail with while the Containers
// feature is not enabled (the real API answers "not supported" and join
// would stall at its network waits).
var ErrHNSUnavailable = errors.New("the Host Network Service is not available: the Windows feature Containers is not enabled (0x80070032, the request is not supported)")

func (t *tx) boot() (*bootTable, error) { return table[bootTable](t, tBoot) }

func (t *tx) features() (*featureTable, error) {
	f, err := table[featureTable](t, tFeatures)
	if err == nil && f.Features == nil {
		f.Features = defaultFeatures()
	}
	return f, err
}

// hnsReady fails while the Containers feature is not in effect.
func (t *tx) hnsReady() error {
	f, err := t.features()
	if err != nil {
		return err
	}
	if c := f.Features[strings.ToLower(ContainersFeature)]; c == nil || c.State != host.FeatureEnabled {
		return ErrHNSUnavailable
	}
	return nil
}

// seedBoot records the first boot of a new root.
func (t *tx) seedBoot(now time.Time) error {
	b, err := t.boot()
	if err != nil || b.BootTime != "" {
		return err
	}
	b.BootTime = now.UTC().Format(time.RFC3339Nano)
	t.mark(tBoot)
	return nil
}

// BootTime is when the simulated host last started.
func (h *Host) BootTime() (string, error) {
	var bt string
	err := h.view(func(t *tx) error {
		b, err := t.boot()
		bt = b.BootTime
		return err
	})
	return bt, err
}

// Boots counts the reboots since the root was created, and returns the
// automatic services the last boot could not start.
func (h *Host) Boots() (int, map[string]string, error) {
	var b bootTable
	err := h.view(func(t *tx) error {
		bt, err := t.boot()
		if err == nil {
			b = *bt
		}
		return err
	})
	return b.Boots, b.Failures, err
}

// Halted is closed once a reboot this Host was asked for has happened:
// whoever serves it ends the connection.
func (h *Host) Halted() <-chan struct{} { return h.halted }

// Reboot accepts the request and reboots in the background after
// req.Delay (see the top of this file).
func (h *Host) Reboot(ctx context.Context, req host.RebootRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if req.Delay < 0 || req.Delay > host.MaxRebootDelay {
		return fmt.Errorf("reboot: delay %s out of range", req.Delay)
	}
	h.rebootMu.Lock()
	defer h.rebootMu.Unlock()
	if h.rebooting {
		// ERROR_SHUTDOWN_IN_PROGRESS
		return errors.New("reboot: a system shutdown is in progress (ERROR_SHUTDOWN_IN_PROGRESS)")
	}
	h.rebooting = true
	go func() {
		if req.Delay > 0 {
			time.Sleep(req.Delay) // the machine's own timer; nothing waits on it
		}
		h.rebootNow()
	}()
	return nil
}

// rebootNow is the power cycle itself.
func (h *Host) rebootNow() {
	defer close(h.halted)
	_ = h.Shutdown(context.Background()) // what cannot be killed is gone at power-off anyway
	_ = h.update(func(t *tx) error { return h.bootStep(t, time.Now()) })
}

// bootStep moves the boot time on, settles pending feature changes and
// starts the automatic services.
func (h *Host) bootStep(t *tx, now time.Time) error {
	b, err := t.boot()
	if err != nil {
		return err
	}
	bt := now.UTC()
	if old, err := time.Parse(time.RFC3339Nano, b.BootTime); err == nil && !bt.After(old) {
		bt = old.Add(time.Microsecond) // a boot time always moves on
	}
	b.BootTime, b.Boots, b.Failures = bt.Format(time.RFC3339Nano), b.Boots+1, nil
	t.mark(tBoot)
	f, err := t.features()
	if err != nil {
		return err
	}
	for _, fi := range f.Features {
		switch fi.State {
		case host.FeatureEnablePending:
			fi.State = host.FeatureEnabled
		case host.FeatureDisablePending:
			fi.State = host.FeatureDisabled
		}
		fi.RestartRequired = false
	}
	t.mark(tFeatures)
	s, err := t.services()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(s.Services))
	for _, rec := range s.Services {
		if st := rec.Config.StartType; st == host.StartAutomatic || st == host.StartDelayedAutomatic {
			names = append(names, rec.Config.Name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := h.start(t, name, nil); err != nil && !errors.Is(err, ErrServiceAlreadyRunning) {
			if b.Failures == nil {
				b.Failures = map[string]string{}
			}
			b.Failures[name] = err.Error()
		}
	}
	return nil
}

// OptionalFeature describes a feature, as DISM's /Get-FeatureInfo does.
func (h *Host) OptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.FeatureInfo{}, err
	}
	var out host.FeatureInfo
	err := h.view(func(t *tx) error {
		fi, err := t.feature(name)
		if err == nil {
			out = *fi
		}
		return err
	})
	return out, err
}

// EnableOptionalFeature enables a feature; it takes effect at the next
// reboot (every feature the simulation knows needs one, as Containers
// does).
func (h *Host) EnableOptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.FeatureInfo{}, err
	}
	var out host.FeatureInfo
	err := h.update(func(t *tx) error {
		fi, err := t.feature(name)
		if err != nil {
			return err
		}
		switch fi.State {
		case host.FeatureDisabled, host.FeatureRemoved:
			fi.State, fi.RestartRequired = host.FeatureEnablePending, true
		case host.FeatureDisablePending:
			fi.State, fi.RestartRequired = host.FeatureEnabled, false // the disable is undone
		}
		t.mark(tFeatures)
		out = *fi
		return nil
	})
	return out, err
}

// SetOptionalFeature sets a feature's state as a test harness would find
// it on a machine (a fresh Windows Server has Containers disabled); a name
// the host does not list yet is added. It is not part of the Host API.
func (h *Host) SetOptionalFeature(name string, state host.FeatureState) error {
	if err := host.ValidFeatureName(name); err != nil {
		return err
	}
	return h.update(func(t *tx) error {
		f, err := t.features()
		if err != nil {
			return err
		}
		pending := state == host.FeatureEnablePending || state == host.FeatureDisablePending
		f.Features[strings.ToLower(name)] = &host.FeatureInfo{Name: name, State: state, RestartRequired: pending, RestartPossible: true}
		t.mark(tFeatures)
		return nil
	})
}

// feature finds a feature by name, ignoring case as DISM does.
func (t *tx) feature(name string) (*host.FeatureInfo, error) {
	if err := host.ValidFeatureName(name); err != nil {
		return nil, err
	}
	f, err := t.features()
	if err != nil {
		return nil, err
	}
	fi := f.Features[strings.ToLower(name)]
	if fi == nil {
		return nil, fmt.Errorf("feature %s: %w (DISM error 0x800f080c: feature name is unknown)", name, host.ErrFeatureUnknown)
	}
	return fi, nil
}
