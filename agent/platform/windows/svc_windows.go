//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
	"golang.org/x/sys/windows/svc/mgr"

	"github.com/wsu-project/wsu/host"
)

// The basic configuration goes through the level-1 calls
// (QueryServiceConfig, ChangeServiceConfig): mgr's Config and UpdateConfig
// also touch level-2 settings, which Wine rejects. Description is level 2
// but supported everywhere; recovery actions and delayed start are separate
// steps whose "invalid level" is reported as host.ErrNotSupported.

const (
	// defaultServiceTimeout applies when a caller passes no timeout.
	defaultServiceTimeout = 60 * time.Second
	servicePoll           = 100 * time.Millisecond
)

func connectSCM() (*mgr.Mgr, error) {
	m, err := mgr.Connect()
	if err != nil {
		return nil, fmt.Errorf("service control manager: %w", err)
	}
	return m, nil
}

// openService returns nil, nil for a service that does not exist.
func openService(m *mgr.Mgr, name string) (*mgr.Service, error) {
	if name == "" {
		return nil, errors.New("service: empty name")
	}
	s, err := m.OpenService(name)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("service %s: open: %w", name, err)
	}
	return s, nil
}

// withService runs f on an existing service; a missing one is an error.
func withService(name string, f func(m *mgr.Mgr, s *mgr.Service) error) error {
	m, err := connectSCM()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	s, err := openService(m, name)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("service %s: %w", name, windows.ERROR_SERVICE_DOES_NOT_EXIST)
	}
	defer s.Close()
	return f(m, s)
}

func (h *winHost) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.ServiceInfo{}, err
	}
	m, err := connectSCM()
	if err != nil {
		return host.ServiceInfo{}, err
	}
	defer m.Disconnect()
	s, err := openService(m, name)
	if err != nil || s == nil {
		return host.ServiceInfo{Config: host.ServiceConfig{Name: name}}, err
	}
	defer s.Close()
	cfg, err := queryConfig(s.Handle, name)
	if err != nil {
		return host.ServiceInfo{}, err
	}
	st, err := queryStatus(s.Handle)
	if err != nil {
		return host.ServiceInfo{}, fmt.Errorf("service %s: status: %w", name, err)
	}
	info := host.ServiceInfo{Exists: true, State: stateName(st.CurrentState), PID: int(st.ProcessId), Config: cfg}
	// Failure actions too, so a plan needs no registry reads for them; an
	// SCM that cannot tell (Wine) leaves them to the registry.
	if actions, period, err := queryFailureActions(s.Handle); err == nil && (len(actions) > 0 || period > 0) {
		info.Recovery = observedRecovery(actions, period)
	}
	return info, nil
}

// observedRecovery reads SC_ACTIONs as the registry's FailureActions value
// reads: restarts in order, no-ops skipped, anything else as Other.
func observedRecovery(actions []windows.SC_ACTION, period uint32) *host.ObservedRecovery {
	r := &host.ObservedRecovery{ServiceRecovery: host.ServiceRecovery{ResetPeriod: time.Duration(period) * time.Second, RestartDelays: []time.Duration{}}}
	for _, a := range actions {
		switch a.Type {
		case windows.SC_ACTION_NONE:
		case windows.SC_ACTION_RESTART:
			r.RestartDelays = append(r.RestartDelays, time.Duration(a.Delay)*time.Millisecond)
		default:
			r.Other = true
		}
	}
	return r
}

func (h *winHost) CreateService(ctx context.Context, cfg host.ServiceConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start, delayed, err := startTypeCode(cfg.StartType)
	if err != nil {
		return fmt.Errorf("service %s: %w", cfg.Name, err)
	}
	if err := checkNUL(cfg); err != nil {
		return err
	}
	if cfg.Name == "" || cfg.BinaryPath == "" {
		return errors.New("service create: name and binary path are required")
	}
	m, err := connectSCM()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	display := cfg.DisplayName
	if display == "" {
		display = cfg.Name
	}
	handle, err := windows.CreateService(m.Handle, utf16(cfg.Name), utf16(display), windows.SERVICE_ALL_ACCESS,
		windows.SERVICE_WIN32_OWN_PROCESS, start, windows.SERVICE_ERROR_NORMAL,
		utf16(buildCommandLine(cfg.BinaryPath, cfg.Args)), nil, nil, multiString(cfg.Dependencies),
		nil, nil) // LocalSystem
	if errors.Is(err, windows.ERROR_SERVICE_EXISTS) {
		return fmt.Errorf("service %s: already exists", cfg.Name)
	}
	if errors.Is(err, windows.ERROR_DUPLICATE_SERVICE_NAME) {
		return fmt.Errorf("service %s: the display name %q belongs to another service", cfg.Name, display)
	}
	if err != nil {
		return fmt.Errorf("service %s: create: %w", cfg.Name, err)
	}
	defer windows.CloseServiceHandle(handle)
	if cfg.Description != "" {
		if err := setDescription(handle, cfg.Description); err != nil {
			// The description is part of the basic configuration (it marks
			// the services wsu manages): no half-made service.
			windows.DeleteService(handle)
			return fmt.Errorf("service %s: description: %w", cfg.Name, err)
		}
	}
	if delayed {
		// The service exists and starts automatically; only the delay is missing.
		return setDelayed(handle, cfg.Name, true)
	}
	return nil
}

func (h *winHost) UpdateService(ctx context.Context, cfg host.ServiceConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start, delayed, err := startTypeCode(cfg.StartType)
	if err != nil {
		return fmt.Errorf("service %s: %w", cfg.Name, err)
	}
	if err := checkNUL(cfg); err != nil {
		return err
	}
	if cfg.BinaryPath == "" {
		return fmt.Errorf("service %s: update: binary path is required", cfg.Name)
	}
	return withService(cfg.Name, func(_ *mgr.Mgr, s *mgr.Service) error {
		display := cfg.DisplayName
		if display == "" {
			display = cfg.Name
		}
		deps := multiString(cfg.Dependencies)
		if deps == nil {
			deps = &[]uint16{0, 0}[0] // empty list: clear (nil would mean "unchanged")
		}
		err := windows.ChangeServiceConfig(s.Handle, windows.SERVICE_NO_CHANGE, start, windows.SERVICE_NO_CHANGE,
			utf16(buildCommandLine(cfg.BinaryPath, cfg.Args)), nil, nil, deps, nil, nil, utf16(display))
		if err != nil {
			return fmt.Errorf("service %s: update: %w", cfg.Name, err)
		}
		if err := setDescription(s.Handle, cfg.Description); err != nil {
			return fmt.Errorf("service %s: description: %w", cfg.Name, err)
		}
		if delayed {
			return setDelayed(s.Handle, cfg.Name, true)
		}
		// Clear the delay only where one is set: where delays cannot exist
		// (Wine), asking would fail for nothing.
		if was, _ := queryDelayed(s.Handle); was {
			return setDelayed(s.Handle, cfg.Name, false)
		}
		return nil
	})
}

func (h *winHost) SetServiceRecovery(ctx context.Context, name string, r host.ServiceRecovery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return withService(name, func(_ *mgr.Mgr, s *mgr.Service) error {
		actions := make([]windows.SC_ACTION, len(r.RestartDelays)+1) // +1: never a nil pointer
		for i, d := range r.RestartDelays {
			actions[i] = windows.SC_ACTION{Type: windows.SC_ACTION_RESTART, Delay: uint32(d.Milliseconds())}
		}
		info := windows.SERVICE_FAILURE_ACTIONS{
			ResetPeriod:  uint32(r.ResetPeriod.Seconds()),
			ActionsCount: uint32(len(r.RestartDelays)),
			Actions:      &actions[0], // with a count of 0: delete the actions
		}
		err := windows.ChangeServiceConfig2(s.Handle, windows.SERVICE_CONFIG_FAILURE_ACTIONS, (*byte)(unsafe.Pointer(&info)))
		if err != nil {
			return level2Error(name, "recovery actions", err)
		}
		// Read back: Wine accepts the call and stores nothing, so only a
		// readable, matching answer counts as applied.
		got, period, err := queryFailureActions(s.Handle)
		if err != nil {
			return level2Error(name, "recovery actions (reading them back)", err)
		}
		if period != info.ResetPeriod || len(got) != len(r.RestartDelays) {
			return fmt.Errorf("service %s: recovery actions were not applied (read back %d actions, reset %ds)", name, len(got), period)
		}
		for i, a := range got {
			if a.Type != windows.SC_ACTION_RESTART || a.Delay != actions[i].Delay {
				return fmt.Errorf("service %s: recovery action %d was not applied", name, i+1)
			}
		}
		return nil
	})
}

func (h *winHost) StartService(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return withService(name, func(_ *mgr.Mgr, s *mgr.Service) error {
		err := s.Start()
		if err == nil || errors.Is(err, windows.ERROR_SERVICE_ALREADY_RUNNING) {
			return nil
		}
		return fmt.Errorf("service %s: start: %w", name, err)
	})
}

func (h *winHost) StopService(ctx context.Context, name string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return withService(name, func(_ *mgr.Mgr, s *mgr.Service) error {
		return stopAndWait(ctx, s.Handle, name, deadline(timeout))
	})
}

func (h *winHost) DeleteService(ctx context.Context, name string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	until := deadline(timeout)
	m, err := connectSCM()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	s, err := openService(m, name)
	if err != nil || s == nil {
		return err // gone already
	}
	// Stop first, so the binary is free once the service is gone.
	err = stopAndWait(ctx, s.Handle, name, until)
	if err == nil {
		if derr := s.Delete(); derr != nil && !errors.Is(derr, windows.ERROR_SERVICE_MARKED_FOR_DELETE) {
			err = fmt.Errorf("service %s: delete: %w", name, derr)
		}
	}
	// The SCM removes a marked service once every handle to it is closed,
	// ours included.
	s.Close()
	if err != nil {
		return err
	}
	return poll(ctx, until, func() (bool, error) {
		h, err := windows.OpenService(m.Handle, utf16(name), windows.SERVICE_QUERY_STATUS)
		if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
			return true, nil
		}
		if err == nil {
			windows.CloseServiceHandle(h)
		}
		return false, nil
	}, func() error {
		return fmt.Errorf("service %s: marked for deletion but still registered when the time ran out (another program holds a handle to it)", name)
	})
}

func (h *winHost) WaitService(ctx context.Context, name string, state host.ServiceState, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return withService(name, func(_ *mgr.Mgr, s *mgr.Service) error {
		var last host.ServiceState
		return poll(ctx, deadline(timeout), func() (bool, error) {
			st, err := queryStatus(s.Handle)
			if err != nil {
				return false, fmt.Errorf("service %s: status: %w", name, err)
			}
			last = stateName(st.CurrentState)
			return last == state, nil
		}, func() error {
			return fmt.Errorf("service %s: still %s, not %s, when the time ran out", name, last, state)
		})
	})
}

// DependentServices computes the dependents from every service's
// dependencies, where the SCM keeps them (the DependOnService value of the
// service's key), rather than asking EnumDependentServices: Wine's is a
// stub that reports none, and one way on both keeps the code Wine tests
// the code Windows runs. It costs one enumeration and one registry read
// per service, paid only when a service with a running binary is stopped.
func (h *winHost) DependentServices(ctx context.Context, name string) ([]host.ServiceStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []host.ServiceStatus
	err := withService(name, func(m *mgr.Mgr, _ *mgr.Service) error {
		all, err := listServices(m)
		if err != nil {
			return fmt.Errorf("service %s: list services: %w", name, err)
		}
		deps := make(map[string][]string, len(all))
		state := make(map[string]host.ServiceState, len(all))
		for _, s := range all {
			if deps[s.name], err = registryDependencies(s.name); err != nil {
				return fmt.Errorf("service %s: dependencies of %s: %w", name, s.name, err)
			}
			state[s.name] = s.state
		}
		for _, d := range host.StopOrder(name, deps) {
			out = append(out, host.ServiceStatus{Name: d, State: state[d]})
		}
		return nil
	})
	return out, err
}

type serviceState struct {
	name  string
	state host.ServiceState
}

// listServices returns every Win32 service with its state, in one call.
func listServices(m *mgr.Mgr) ([]serviceState, error) {
	var buf []byte
	var needed, count uint32
	for {
		var p *byte
		if len(buf) > 0 {
			p = &buf[0]
		}
		err := windows.EnumServicesStatusEx(m.Handle, windows.SC_ENUM_PROCESS_INFO, windows.SERVICE_WIN32,
			windows.SERVICE_STATE_ALL, p, uint32(len(buf)), &needed, &count, nil, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, windows.ERROR_MORE_DATA) || needed <= uint32(len(buf)) {
			return nil, err
		}
		buf = make([]byte, needed)
	}
	if count == 0 {
		return nil, nil
	}
	out := make([]serviceState, 0, count)
	for _, s := range unsafe.Slice((*windows.ENUM_SERVICE_STATUS_PROCESS)(unsafe.Pointer(&buf[0])), int(count)) {
		out = append(out, serviceState{
			name:  windows.UTF16PtrToString(s.ServiceName),
			state: stateName(s.ServiceStatusProcess.CurrentState),
		})
	}
	return out, nil
}

// stopAndWait asks a service to stop and returns once it is stopped and its
// process has exited, so the executable can be replaced.
func stopAndWait(ctx context.Context, h windows.Handle, name string, until time.Time) error {
	st, err := queryStatus(h)
	if err != nil {
		return fmt.Errorf("service %s: status: %w", name, err)
	}
	if st.CurrentState == windows.SERVICE_STOPPED {
		return nil
	}
	// Hold the process before stopping, so its pid cannot be reused under
	// us. A shared process (svchost) outlives the service: not waited for.
	var proc windows.Handle
	if st.ProcessId != 0 && st.ServiceType&windows.SERVICE_WIN32_SHARE_PROCESS == 0 {
		proc, _ = windows.OpenProcess(windows.SYNCHRONIZE, false, st.ProcessId)
	}
	if proc != 0 {
		defer windows.CloseHandle(proc)
	}
	sent := false
	err = poll(ctx, until, func() (bool, error) {
		st, err := queryStatus(h)
		if err != nil {
			return false, fmt.Errorf("service %s: status: %w", name, err)
		}
		switch st.CurrentState {
		case windows.SERVICE_STOPPED:
			return true, nil
		case windows.SERVICE_STOP_PENDING:
			return false, nil
		}
		if !sent {
			// A service still starting cannot take the stop yet; ask again
			// on the next round.
			var ss windows.SERVICE_STATUS
			err := windows.ControlService(h, windows.SERVICE_CONTROL_STOP, &ss)
			switch {
			case err == nil:
				sent = true
			case errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE):
				return true, nil
			case errors.Is(err, windows.ERROR_SERVICE_CANNOT_ACCEPT_CTRL):
			default:
				return false, fmt.Errorf("service %s: stop: %w", name, err)
			}
		}
		return false, nil
	}, func() error {
		return fmt.Errorf("service %s: did not stop in time", name)
	})
	if err != nil || proc == 0 {
		return err
	}
	left := time.Until(until)
	if left < 0 {
		left = 0
	}
	ev, err := windows.WaitForSingleObject(proc, uint32(left.Milliseconds()))
	if err != nil {
		return fmt.Errorf("service %s: wait for process %d: %w", name, st.ProcessId, err)
	}
	if ev != windows.WAIT_OBJECT_0 {
		return fmt.Errorf("service %s: stopped, but its process %d is still running", name, st.ProcessId)
	}
	return nil
}

func deadline(timeout time.Duration) time.Time {
	if timeout <= 0 {
		timeout = defaultServiceTimeout
	}
	return time.Now().Add(timeout)
}

// poll calls check until it reports done, fails, ctx ends or until passes
// (then the error is timedOut's).
func poll(ctx context.Context, until time.Time, check func() (bool, error), timedOut func() error) error {
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		if !time.Now().Before(until) {
			return timedOut()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(servicePoll, time.Until(until))):
		}
	}
}

func queryStatus(h windows.Handle) (windows.SERVICE_STATUS_PROCESS, error) {
	var st windows.SERVICE_STATUS_PROCESS
	var n uint32
	err := windows.QueryServiceStatusEx(h, windows.SC_STATUS_PROCESS_INFO, (*byte)(unsafe.Pointer(&st)), uint32(unsafe.Sizeof(st)), &n)
	return st, err
}

func stateName(s uint32) host.ServiceState {
	switch s {
	case windows.SERVICE_STOPPED:
		return host.ServiceStopped
	case windows.SERVICE_START_PENDING:
		return host.ServiceStartPending
	case windows.SERVICE_STOP_PENDING:
		return host.ServiceStopPending
	case windows.SERVICE_RUNNING:
		return host.ServiceRunning
	case windows.SERVICE_PAUSED:
		return host.ServicePaused
	}
	return host.ServiceUnknown
}

// startTypeCode maps a start type to the SCM's; "" is manual, as with sc.exe.
func startTypeCode(t host.StartType) (code uint32, delayed bool, err error) {
	switch t {
	case host.StartAutomatic:
		return windows.SERVICE_AUTO_START, false, nil
	case host.StartDelayedAutomatic:
		return windows.SERVICE_AUTO_START, true, nil
	case host.StartManual, "":
		return windows.SERVICE_DEMAND_START, false, nil
	case host.StartDisabled:
		return windows.SERVICE_DISABLED, false, nil
	}
	return 0, false, fmt.Errorf("unknown start type %q (automatic, delayed_automatic, manual or disabled)", t)
}

// queryConfig reads the basic configuration (level 1) and the description.
func queryConfig(h windows.Handle, name string) (host.ServiceConfig, error) {
	var p *windows.QUERY_SERVICE_CONFIG
	for n := uint32(1024); ; {
		b := make([]byte, n)
		p = (*windows.QUERY_SERVICE_CONFIG)(unsafe.Pointer(&b[0]))
		err := windows.QueryServiceConfig(h, p, n, &n)
		if err == nil {
			break
		}
		if !errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) {
			return host.ServiceConfig{}, fmt.Errorf("service %s: query config: %w", name, err)
		}
	}
	exe, args := parseCommandLine(windows.UTF16PtrToString(p.BinaryPathName))
	cfg := host.ServiceConfig{
		Name:         name,
		DisplayName:  windows.UTF16PtrToString(p.DisplayName),
		BinaryPath:   exe,
		Args:         args,
		Dependencies: fromMultiString(p.Dependencies),
	}
	if len(cfg.Dependencies) == 0 {
		// Wine's QueryServiceConfig leaves lpDependencies empty, although its
		// SCM keeps them (and ChangeServiceConfig changes them) where Windows
		// does: the service's registry key. Read them there; on Windows the
		// key and the call agree.
		deps, err := registryDependencies(name)
		if err != nil {
			return host.ServiceConfig{}, fmt.Errorf("service %s: query dependencies: %w", name, err)
		}
		cfg.Dependencies = deps
	}
	switch p.StartType {
	case windows.SERVICE_AUTO_START:
		cfg.StartType = host.StartAutomatic
		// Where delayed start cannot be read (Wine), it cannot have been set.
		if d, _ := queryDelayed(h); d {
			cfg.StartType = host.StartDelayedAutomatic
		}
	case windows.SERVICE_DEMAND_START:
		cfg.StartType = host.StartManual
	case windows.SERVICE_DISABLED:
		cfg.StartType = host.StartDisabled
	default:
		cfg.StartType = host.StartType(fmt.Sprintf("driver_%d", p.StartType)) // boot or system start
	}
	b, err := queryConfig2(h, windows.SERVICE_CONFIG_DESCRIPTION)
	if err != nil {
		return host.ServiceConfig{}, fmt.Errorf("service %s: query description: %w", name, err)
	}
	cfg.Description = windows.UTF16PtrToString((*windows.SERVICE_DESCRIPTION)(unsafe.Pointer(&b[0])).Description)
	return cfg, nil
}

// registryDependencies reads a service's dependencies from its registry
// key, as QueryServiceConfig reports them: services, then load order groups
// prefixed with SC_GROUP_IDENTIFIER ('+').
func registryDependencies(name string) ([]string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Services\`+name, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer k.Close()
	var out []string
	for _, v := range []struct{ name, prefix string }{{"DependOnService", ""}, {"DependOnGroup", "+"}} {
		ss, _, err := k.GetStringsValue(v.name)
		if errors.Is(err, registry.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		for _, s := range ss {
			if s != "" {
				out = append(out, v.prefix+s)
			}
		}
	}
	return out, nil
}

func queryConfig2(h windows.Handle, level uint32) ([]byte, error) {
	n := uint32(1024)
	for {
		b := make([]byte, n)
		err := windows.QueryServiceConfig2(h, level, &b[0], n, &n)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) {
			return nil, err
		}
	}
}

func queryDelayed(h windows.Handle) (bool, error) {
	b, err := queryConfig2(h, windows.SERVICE_CONFIG_DELAYED_AUTO_START_INFO)
	if err != nil {
		return false, err
	}
	return (*windows.SERVICE_DELAYED_AUTO_START_INFO)(unsafe.Pointer(&b[0])).IsDelayedAutoStartUp != 0, nil
}

func setDelayed(h windows.Handle, name string, on bool) error {
	info := windows.SERVICE_DELAYED_AUTO_START_INFO{}
	if on {
		info.IsDelayedAutoStartUp = 1
	}
	err := windows.ChangeServiceConfig2(h, windows.SERVICE_CONFIG_DELAYED_AUTO_START_INFO, (*byte)(unsafe.Pointer(&info)))
	if err != nil {
		return level2Error(name, "delayed automatic start", err)
	}
	return nil
}

func setDescription(h windows.Handle, desc string) error {
	d := windows.SERVICE_DESCRIPTION{Description: utf16(desc)}
	return windows.ChangeServiceConfig2(h, windows.SERVICE_CONFIG_DESCRIPTION, (*byte)(unsafe.Pointer(&d)))
}

func queryFailureActions(h windows.Handle) ([]windows.SC_ACTION, uint32, error) {
	b, err := queryConfig2(h, windows.SERVICE_CONFIG_FAILURE_ACTIONS)
	if err != nil {
		return nil, 0, err
	}
	p := (*windows.SERVICE_FAILURE_ACTIONS)(unsafe.Pointer(&b[0]))
	if p.Actions == nil || p.ActionsCount == 0 {
		return nil, p.ResetPeriod, nil
	}
	return append([]windows.SC_ACTION(nil), unsafe.Slice(p.Actions, p.ActionsCount)...), p.ResetPeriod, nil
}

// level2Error reports a failed optional setting. ERROR_INVALID_LEVEL means
// the SCM does not know the setting at all (Wine): not supported.
func level2Error(name, what string, err error) error {
	if errors.Is(err, windows.ERROR_INVALID_LEVEL) {
		return fmt.Errorf("service %s: %s: %w (%s: the service control manager rejects this setting: %v)",
			name, what, host.ErrNotSupported, platform, err)
	}
	return fmt.Errorf("service %s: %s: %w", name, what, err)
}

// utf16 converts a string checked by checkNUL for a Win32 call.
func utf16(s string) *uint16 {
	p, _ := windows.UTF16PtrFromString(s)
	return p
}

// checkNUL refuses strings Win32 cannot take: they would be cut at the NUL.
func checkNUL(cfg host.ServiceConfig) error {
	all := append([]string{cfg.Name, cfg.DisplayName, cfg.Description, cfg.BinaryPath}, cfg.Args...)
	for _, s := range append(all, cfg.Dependencies...) {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("service %s: a value contains a NUL character", cfg.Name)
		}
	}
	return nil
}

// multiString encodes a double-NUL-terminated list; nil for an empty one.
func multiString(ss []string) *uint16 {
	if len(ss) == 0 {
		return nil
	}
	var b []uint16
	for _, s := range ss {
		u, _ := windows.UTF16FromString(s)
		b = append(b, u...)
	}
	b = append(b, 0)
	return &b[0]
}

// fromMultiString decodes a double-NUL-terminated list.
func fromMultiString(p *uint16) []string {
	if p == nil {
		return nil
	}
	var out []string
	for {
		n := 0
		for *(*uint16)(unsafe.Add(unsafe.Pointer(p), 2*n)) != 0 {
			n++
		}
		if n == 0 {
			return out
		}
		out = append(out, windows.UTF16ToString(unsafe.Slice(p, n)))
		p = (*uint16)(unsafe.Add(unsafe.Pointer(p), 2*(n+1)))
	}
}
