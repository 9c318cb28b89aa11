package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Rebooter restarts the machine. It is a separate interface, not part of
// Host, because only the Windows platform and the simulation can do it: a
// backend without it (the POSIX agent, wsu in-process) is not asked to.
// Transports and wrappers always implement it and pass the backend's
// "not supported" on.
type Rebooter interface {
	// Reboot asks the operating system to restart after req.Delay and
	// returns once the request was accepted, before the machine goes down:
	// the connection drops some time later. Whether the machine came back
	// is the caller's to find out (a new Facts().BootTime).
	Reboot(ctx context.Context, req RebootRequest) error
}

// RebootRequest is what a reboot is asked with.
type RebootRequest struct {
	// Delay is the time between the request and the shutdown (Windows
	// shows Message for that long); 0: at once.
	Delay time.Duration `json:"delay,omitempty"`
	// Message is shown to logged-on users and recorded in the event log.
	Message string `json:"message,omitempty"`
}

// MaxRebootDelay is the longest delay InitiateSystemShutdownEx accepts
// (MAX_SHUTDOWN_TIMEOUT, ten years in seconds); anything near it is a
// mistake, so modules bound it far lower.
const MaxRebootDelay = 315360000 * time.Second

// OptionalFeatures reads and enables Windows optional features (DISM's
// "features": Containers, Hyper-V...). Like Rebooter it is optional: only
// the Windows platform and the simulation implement it for real.
type OptionalFeatures interface {
	// OptionalFeature describes the named feature; one the OS does not
	// know is an error wrapping ErrFeatureUnknown.
	OptionalFeature(ctx context.Context, name string) (FeatureInfo, error)
	// EnableOptionalFeature enables the named feature (with the features
	// it needs) without restarting; the result says whether a restart is
	// needed before it takes effect.
	EnableOptionalFeature(ctx context.Context, name string) (FeatureInfo, error)
}

// FeatureOpTimeout bounds one OptionalFeatures call: enabling a feature
// through DISM takes minutes on a real machine.
const FeatureOpTimeout = 30 * time.Minute

// ErrFeatureUnknown is wrapped by OptionalFeature for a name the host's
// feature list does not have (DISM error 0x800f080c).
var ErrFeatureUnknown = errors.New("unknown optional feature")

// FeatureState is a feature's install state as DISM reports it.
type FeatureState string

const (
	FeatureEnabled        FeatureState = "enabled"
	FeatureEnablePending  FeatureState = "enable-pending" // enabled, takes effect at the next restart
	FeatureDisabled       FeatureState = "disabled"
	FeatureDisablePending FeatureState = "disable-pending" // disabled, still active until the next restart
	FeatureRemoved        FeatureState = "removed"         // disabled with its payload removed
)

// FeatureInfo describes one optional feature.
type FeatureInfo struct {
	Name  string       `json:"name"`
	State FeatureState `json:"state"`
	// RestartRequired: a change of this feature is pending until the
	// machine restarts (after an enable: the feature is not usable yet).
	RestartRequired bool `json:"restart_required,omitempty"`
	// RestartPossible: changing the feature may need a restart (DISM's
	// "Restart Required : Possible"), which a plan can say before it is
	// applied.
	RestartPossible bool `json:"restart_possible,omitempty"`
}

// On reports whether the feature is enabled or will be after a restart.
func (f FeatureInfo) On() bool {
	return f.State == FeatureEnabled || f.State == FeatureEnablePending
}

// ValidFeatureName: DISM names are letters, digits, '-', '_' and '.';
// nothing that could be read as another option of a command line.
func ValidFeatureName(name string) error {
	if name == "" {
		return fmt.Errorf("empty feature name")
	}
	if len(name) > 256 {
		return fmt.Errorf("feature name longer than 256 characters")
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}); i >= 0 {
		return fmt.Errorf("feature name %q has %q: only letters, digits, '-', '_' and '.' are allowed", name, name[i:i+1])
	}
	return nil
}

// AsRebooter returns h's Rebooter, or an error wrapping ErrNotSupported.
func AsRebooter(h Host) (Rebooter, error) {
	if r, ok := h.(Rebooter); ok {
		return r, nil
	}
	return nil, NotSupported("reboot", fmt.Sprintf("%T", h))
}

// AsOptionalFeatures returns h's OptionalFeatures, or an error wrapping
// ErrNotSupported.
func AsOptionalFeatures(h Host) (OptionalFeatures, error) {
	if f, ok := h.(OptionalFeatures); ok {
		return f, nil
	}
	return nil, NotSupported("optional features", fmt.Sprintf("%T", h))
}
