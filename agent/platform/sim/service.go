package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
)

// maxStopGrace bounds how long a stopping service gets to exit on SIGTERM
// before it is killed.
const maxStopGrace = 10 * time.Second

func svcKey(name string) string { return strings.ToLower(name) }

// imageName is the base name of a Windows path, as Task Manager shows it.
func imageName(p string) string {
	if i := strings.LastIndexAny(p, `\/`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// deadline turns a timeout into a deadline; <= 0 leaves only ctx.
func deadline(timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(timeout)
}

// normalize validates a configuration and fills in what the SCM would.
func normalize(cfg host.ServiceConfig) (host.ServiceConfig, error) {
	if cfg.Name == "" || strings.ContainsAny(cfg.Name, `/\`) {
		return cfg, fmt.Errorf("invalid service name %q", cfg.Name)
	}
	if _, err := parsePath(cfg.BinaryPath); err != nil {
		return cfg, fmt.Errorf("service %s: binary: %w", cfg.Name, err)
	}
	switch cfg.StartType {
	case "":
		cfg.StartType = host.StartManual // sc.exe's default, demand
	case host.StartAutomatic, host.StartDelayedAutomatic, host.StartManual, host.StartDisabled:
	default:
		return cfg, fmt.Errorf("service %s: unknown start type %q", cfg.Name, cfg.StartType)
	}
	if cfg.DisplayName == "" {
		cfg.DisplayName = cfg.Name
	}
	cfg.Args = slices.Clone(cfg.Args)
	cfg.Dependencies = slices.Clone(cfg.Dependencies)
	return cfg, nil
}

// serviceProc is the running process of a service, nil when stopped.
func (t *tx) serviceProc(name string) (*procRecord, error) {
	p, err := t.processes()
	if err != nil {
		return nil, err
	}
	for i, r := range p.Procs {
		if r.Service != "" && strings.EqualFold(r.Service, name) && r.alive() {
			return &p.Procs[i], nil
		}
	}
	return nil, nil
}

func (h *Host) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.ServiceInfo{}, err
	}
	var info host.ServiceInfo
	err := h.view(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		rec := s.Services[svcKey(name)]
		if rec == nil {
			return nil
		}
		info = host.ServiceInfo{Exists: true, State: host.ServiceStopped, Config: rec.Config}
		if r := rec.Recovery; r != nil && (len(r.RestartDelays) > 0 || r.ResetPeriod > 0) {
			info.Recovery = &host.ObservedRecovery{ServiceRecovery: *r}
		}
		p, err := t.serviceProc(name)
		if p != nil {
			info.State, info.PID = host.ServiceRunning, p.PID
		}
		return err
	})
	if err != nil {
		return host.ServiceInfo{}, fmt.Errorf("query service %s: %w", name, err)
	}
	return info, nil
}

func (h *Host) CreateService(ctx context.Context, cfg host.ServiceConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := normalize(cfg)
	if err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	err = h.update(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		if s.Services[svcKey(cfg.Name)] != nil {
			return ErrServiceExists
		}
		s.Services[svcKey(cfg.Name)] = &svcRecord{Config: cfg}
		t.mark(tServices)
		return nil
	})
	if err != nil {
		return fmt.Errorf("create service %s: %w", cfg.Name, err)
	}
	return nil
}

func (h *Host) UpdateService(ctx context.Context, cfg host.ServiceConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := normalize(cfg)
	if err != nil {
		return fmt.Errorf("update service: %w", err)
	}
	err = h.update(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		rec := s.Services[svcKey(cfg.Name)]
		if rec == nil {
			return ErrServiceNotFound
		}
		cfg.Name = rec.Config.Name // the SCM keeps the name it was created with
		rec.Config = cfg
		t.mark(tServices)
		return nil
	})
	if err != nil {
		return fmt.Errorf("update service %s: %w", cfg.Name, err)
	}
	return nil
}

// SetServiceRecovery stores the failure actions; the simulation does not
// restart failed services.
func (h *Host) SetServiceRecovery(ctx context.Context, name string, r host.ServiceRecovery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.RestartDelays = slices.Clone(r.RestartDelays)
	err := h.update(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		rec := s.Services[svcKey(name)]
		if rec == nil {
			return ErrServiceNotFound
		}
		rec.Recovery = &r
		t.mark(tServices)
		return nil
	})
	if err != nil {
		return fmt.Errorf("set recovery of service %s: %w", name, err)
	}
	return nil
}

// ServiceRecovery returns what SetServiceRecovery stored (nil: never
// set); the Host API has no call that reads it back.
func (h *Host) ServiceRecovery(name string) (*host.ServiceRecovery, error) {
	var r *host.ServiceRecovery
	err := h.view(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		rec := s.Services[svcKey(name)]
		if rec == nil {
			return ErrServiceNotFound
		}
		r = rec.Recovery
		return nil
	})
	return r, err
}

// StartService starts the service's dependencies first. A binary that is a
// Linux executable really runs, in its own session, with its output in
// root/logs/<name>.log; any other binary runs in simulation only.
func (h *Host) StartService(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.update(func(t *tx) error { return h.start(t, name, nil) }); err != nil {
		return fmt.Errorf("start service %s: %w", name, err)
	}
	return nil
}

// start starts name, reached through the dependency chain.
func (h *Host) start(t *tx, name string, chain []string) error {
	s, err := t.services()
	if err != nil {
		return err
	}
	rec := s.Services[svcKey(name)]
	if rec == nil {
		if len(chain) == 0 {
			return ErrServiceNotFound
		}
		return fmt.Errorf("dependency %s of %s: %w", name, chain[len(chain)-1], ErrDependencyMissing)
	}
	if slices.ContainsFunc(chain, func(c string) bool { return strings.EqualFold(c, name) }) {
		return fmt.Errorf("%s: %w", strings.Join(append(chain, name), " -> "), ErrCircularDependency)
	}
	cfg := rec.Config
	if p, err := t.serviceProc(name); err != nil {
		return err
	} else if p != nil {
		if len(chain) == 0 {
			return ErrServiceAlreadyRunning
		}
		return nil
	}
	if cfg.StartType == host.StartDisabled {
		if len(chain) == 0 {
			return ErrServiceDisabled
		}
		return fmt.Errorf("dependency %s: %w", cfg.Name, ErrServiceDisabled)
	}
	for _, dep := range cfg.Dependencies {
		if dep == "" || strings.HasPrefix(dep, "+") {
			continue // "+name" is a load-order group, not a service
		}
		if err := h.start(t, dep, append(chain, cfg.Name)); err != nil {
			return err
		}
	}
	lp, err := h.LocalPath(cfg.BinaryPath)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(lp); err != nil || fi.IsDir() {
		return fmt.Errorf("%s: the system cannot find the file specified (ERROR_FILE_NOT_FOUND): %w", cfg.BinaryPath, os.ErrNotExist)
	}
	p, err := t.processes()
	if err != nil {
		return err
	}
	r := procRecord{Image: imageName(cfg.BinaryPath), Service: cfg.Name, Binary: lp}
	if linuxExecutable(lp) {
		if r.PID, r.Start, err = h.spawn(cfg, lp); err != nil {
			return fmt.Errorf("%s: %w", cfg.BinaryPath, err)
		}
		r.Real = true
	} else {
		r.PID = p.nextPID()
	}
	p.Procs = append(p.Procs, r)
	t.mark(tProcesses)
	return nil
}

// spawn starts a service process and returns its pid and start time.
func (h *Host) spawn(cfg host.ServiceConfig, lp string) (int, uint64, error) {
	logf, err := os.OpenFile(filepath.Join(h.logDir, cfg.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close() // the child has its own descriptor
	var cmd *exec.Cmd
	for try := 1; ; try++ {
		cmd = exec.Command(lp, cfg.Args...)
		cmd.Dir = filepath.Join(h.fsRoot, "C")
		cmd.Env = append(os.Environ(), EnvRoot+"="+h.root, EnvService+"="+cfg.Name)
		cmd.Stdout, cmd.Stderr = logf, logf
		detach(cmd)
		err = cmd.Start()
		if err != nil && textBusy(err) && try < 10 {
			time.Sleep(time.Duration(try) * 10 * time.Millisecond)
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		break
	}
	// Read the start time before Wait can reap the process.
	start, _, err := procStat(cmd.Process.Pid)
	go cmd.Wait() // reap it when it exits; the table tracks it by pid
	if err != nil {
		cmd.Process.Kill()
		return 0, 0, err
	}
	return cmd.Process.Pid, start, nil
}

// StopService stops a running service and waits for its process to exit;
// stopping a stopped service does nothing. It fails while a running
// service depends on it. Timeout <= 0 leaves only ctx as the bound.
func (h *Host) StopService(ctx context.Context, name string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.stop(ctx, name, timeout); err != nil {
		return fmt.Errorf("stop service %s: %w", name, err)
	}
	return nil
}

func (h *Host) stop(ctx context.Context, name string, timeout time.Duration) error {
	until := deadline(timeout)
	var target *procRecord
	err := h.update(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		if s.Services[svcKey(name)] == nil {
			return ErrServiceNotFound
		}
		p, err := t.serviceProc(name)
		if err != nil || p == nil {
			return err
		}
		var deps []string
		for _, rec := range s.Services {
			if !slices.ContainsFunc(rec.Config.Dependencies, func(d string) bool { return strings.EqualFold(d, name) }) {
				continue
			}
			if dp, err := t.serviceProc(rec.Config.Name); err != nil {
				return err
			} else if dp != nil {
				deps = append(deps, rec.Config.Name)
			}
		}
		if len(deps) > 0 {
			slices.Sort(deps)
			return fmt.Errorf("%w: %s", ErrDependentServicesRunning, strings.Join(deps, ", "))
		}
		if p.Real {
			cp := *p
			target = &cp
			return nil
		}
		pid := p.PID
		_, err = t.removeProcs(func(r procRecord) bool { return r.PID == pid })
		return err
	})
	if err != nil || target == nil {
		return err
	}
	grace := maxStopGrace
	if timeout > 0 {
		grace = min(timeout/2, maxStopGrace)
	}
	if err := terminate(ctx, *target, true, grace, until); err != nil {
		return err
	}
	// Let the table forget the exited process now rather than later.
	return h.update(func(t *tx) error { _, err := t.processes(); return err })
}

// DependentServices lists the services depending on name, directly or
// through others, in stop order (host.StopOrder), each with its state.
func (h *Host) DependentServices(ctx context.Context, name string) ([]host.ServiceStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []host.ServiceStatus
	err := h.view(func(t *tx) error {
		s, err := t.services()
		if err != nil {
			return err
		}
		if s.Services[svcKey(name)] == nil {
			return ErrServiceNotFound
		}
		deps := map[string][]string{}
		for _, rec := range s.Services {
			deps[rec.Config.Name] = rec.Config.Dependencies
		}
		for _, d := range host.StopOrder(name, deps) {
			st := host.ServiceStatus{Name: d, State: host.ServiceStopped}
			if p, err := t.serviceProc(d); err != nil {
				return err
			} else if p != nil {
				st.State = host.ServiceRunning
			}
			out = append(out, st)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dependents of service %s: %w", name, err)
	}
	return out, nil
}

// DeleteService stops the service if it runs (with StopService's rules)
// and removes it.
// servicesKey is where the SCM keeps each service's configuration.
const servicesKey = `HKEY_LOCAL_MACHINE\SYSTEM\CurrentControlSet\Services`

func (h *Host) DeleteService(ctx context.Context, name string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := h.stop(ctx, name, timeout)
	if err == nil {
		err = h.update(func(t *tx) error {
			s, err := t.services()
			if err != nil {
				return err
			}
			if s.Services[svcKey(name)] == nil {
				return ErrServiceNotFound
			}
			if p, err := t.serviceProc(name); err != nil {
				return err
			} else if p != nil {
				return errors.New("the service was started again while being deleted")
			}
			delete(s.Services, svcKey(name))
			t.mark(tServices)
			return t.regDeleteTree(servicesKey + `\` + name)
		})
	}
	if err != nil {
		return fmt.Errorf("delete service %s: %w", name, err)
	}
	return nil
}

// WaitService polls until the service is in state; timeout <= 0 leaves
// only ctx as the bound.
func (h *Host) WaitService(ctx context.Context, name string, state host.ServiceState, timeout time.Duration) error {
	until := deadline(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		info, err := h.QueryService(ctx, name)
		if err != nil {
			return fmt.Errorf("wait for service: %w", err)
		}
		if !info.Exists {
			return fmt.Errorf("wait for service %s: %w", name, ErrServiceNotFound)
		}
		if info.State == state {
			return nil
		}
		if !until.IsZero() && time.Now().After(until) {
			return fmt.Errorf("wait for service %s to be %s: timed out after %s (it is %s)", name, state, timeout, info.State)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for service %s to be %s: %w", name, state, ctx.Err())
		case <-tick.C:
		}
	}
}
