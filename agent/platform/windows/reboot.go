package windows

import (
	"fmt"
	"time"

	"github.com/wsu-project/wsu/host"
)

// ShutdownCall is what Reboot asks of InitiateSystemShutdownExW (advapi32)
// after enabling SeShutdownPrivilege in the agent's token. It is a value
// so that the call can be replaced (Options.Shutdown) and checked where
// the real one cannot be made: under Wine the test tier runs Reboot up to
// this call and records it instead of restarting the test machine.
type ShutdownCall struct {
	// Message is shown to logged-on users and written to the event log.
	Message string `json:"message"`
	// Timeout is the delay in seconds before the shutdown; Windows shows
	// the message meanwhile.
	Timeout uint32 `json:"timeout"`
	// ForceAppsClosed: applications with unsaved data do not hold the
	// shutdown up (an unattended node has nobody to answer them).
	ForceAppsClosed bool `json:"force_apps_closed"`
	// RebootAfterShutdown: restart, not power off.
	RebootAfterShutdown bool `json:"reboot_after_shutdown"`
	// Reason is the shutdown reason code recorded in the event log.
	Reason uint32 `json:"reason"`
}

// The shutdown reason wsu records: a planned restart for an application's
// installation (SHTDN_REASON_FLAG_PLANNED | SHTDN_REASON_MAJOR_APPLICATION
// | SHTDN_REASON_MINOR_INSTALLATION, as reason.h defines them).
const (
	shtdnReasonFlagPlanned              = 0x80000000
	shtdnReasonMajorApplication         = 0x00040000
	shtdnReasonMinorInstallation        = 0x00000002
	RebootReason                 uint32 = shtdnReasonFlagPlanned | shtdnReasonMajorApplication | shtdnReasonMinorInstallation
)

// maxShutdownMessage is the longest message InitiateSystemShutdownEx
// takes (MAX_REASON_COMMENT_LEN, in UTF-16 code units).
const maxShutdownMessage = 512

// shutdownCallFor turns a reboot request into the call Reboot makes. The
// delay is rounded up to whole seconds: a reboot never comes earlier than
// asked.
func shutdownCallFor(req host.RebootRequest) (ShutdownCall, error) {
	if req.Delay < 0 || req.Delay > host.MaxRebootDelay {
		return ShutdownCall{}, fmt.Errorf("reboot: delay %s out of range (0 to %s)", req.Delay, host.MaxRebootDelay)
	}
	if n := utf16Len(req.Message); n > maxShutdownMessage {
		return ShutdownCall{}, fmt.Errorf("reboot: message of %d UTF-16 units is longer than the %d Windows takes", n, maxShutdownMessage)
	}
	secs := (req.Delay + time.Second - 1) / time.Second
	return ShutdownCall{
		Message:             req.Message,
		Timeout:             uint32(secs),
		ForceAppsClosed:     true,
		RebootAfterShutdown: true,
		Reason:              RebootReason,
	}, nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
