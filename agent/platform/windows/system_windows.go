//go:build windows

package windows

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// Options replace parts of the Windows platform that cannot run where it
// is tested.
type Options struct {
	// Shutdown makes the InitiateSystemShutdownExW call Reboot decided on;
	// nil: the real call. The Wine tests record the call instead (Wine's
	// advapi32 answers it without restarting anything, and asserting on
	// that would prove nothing).
	Shutdown func(ShutdownCall) error
}

// NewWithOptions is New with parts replaced.
func NewWithOptions(o Options) host.Host {
	h := &winHost{FS: winFS, shutdown: o.Shutdown}
	if h.shutdown == nil {
		h.shutdown = initiateShutdown
	}
	return h
}

var (
	_ host.Rebooter         = (*winHost)(nil)
	_ host.OptionalFeatures = (*winHost)(nil)
)

// Reboot enables SeShutdownPrivilege in the agent's token (held but
// disabled in an administrator's) and asks for a restart after req.Delay.
func (h *winHost) Reboot(ctx context.Context, req host.RebootRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	call, err := shutdownCallFor(req)
	if err != nil {
		return err
	}
	if err := enablePrivilege("SeShutdownPrivilege"); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	if err := h.shutdown(call); err != nil {
		return fmt.Errorf("reboot: InitiateSystemShutdownEx: %w", err)
	}
	return nil
}

// initiateShutdown is the real call.
func initiateShutdown(c ShutdownCall) error {
	msg, err := windows.UTF16PtrFromString(c.Message)
	if err != nil {
		return err
	}
	return windows.InitiateSystemShutdownEx(nil, msg, c.Timeout, c.ForceAppsClosed, c.RebootAfterShutdown, c.Reason)
}

// enablePrivilege enables a privilege the process token holds. A token
// without it is an error (AdjustTokenPrivileges reports that as
// ERROR_NOT_ALL_ASSIGNED, not as a failure).
func enablePrivilege(name string) error {
	var tok windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ADJUST_PRIVILEGES|windows.TOKEN_QUERY, &tok); err != nil {
		return fmt.Errorf("open process token: %w", err)
	}
	defer tok.Close()
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return err
	}
	var luid windows.LUID
	if err := windows.LookupPrivilegeValue(nil, p, &luid); err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	tp := windows.Tokenprivileges{PrivilegeCount: 1}
	tp.Privileges[0] = windows.LUIDAndAttributes{Luid: luid, Attributes: windows.SE_PRIVILEGE_ENABLED}
	err = windows.AdjustTokenPrivileges(tok, false, &tp, 0, nil, nil)
	if err == windows.ERROR_NOT_ALL_ASSIGNED {
		return fmt.Errorf("the agent's account does not hold %s (run it as an administrator or SYSTEM)", name)
	}
	if err != nil {
		return fmt.Errorf("enable %s: %w", name, err)
	}
	return nil
}

// OptionalFeature describes a feature through dism.exe (dism.go).
func (h *winHost) OptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	return h.dism().info(ctx, name)
}

// EnableOptionalFeature enables a feature through dism.exe, without
// restarting.
func (h *winHost) EnableOptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	return h.dism().enable(ctx, name)
}

func (h *winHost) dism() dism {
	sys, err := windows.GetSystemDirectory()
	if err != nil {
		sys = `C:\Windows\System32`
	}
	return dism{exe: filepath.Join(sys, "dism.exe"), run: h.Run}
}

// bootTime is when Windows started, as the kernel keeps it
// (SYSTEM_TIMEOFDAY_INFORMATION.BootTime): fixed for the life of the
// boot, unlike now minus GetTickCount64, which jitters.
func bootTime() (string, error) {
	var info struct {
		BootTime, CurrentTime, TimeZoneBias int64
		TimeZoneID, Reserved                uint32
		BootTimeBias, SleepTimeBias         uint64
	}
	var n uint32
	if err := windows.NtQuerySystemInformation(windows.SystemTimeOfDayInformation, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info)), &n); err != nil {
		return "", fmt.Errorf("boot time: %w", err)
	}
	ft := windows.Filetime{LowDateTime: uint32(info.BootTime), HighDateTime: uint32(info.BootTime >> 32)}
	return time.Unix(0, ft.Nanoseconds()).UTC().Format(time.RFC3339Nano), nil
}
