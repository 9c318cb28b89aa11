package windows

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Stopping a service that others depend on: the SCM refuses to stop it
// while a dependent runs (kubelet needs containerd, hybrid-overlay-node the
// kubelet, kube-proxy hybrid-overlay-node), so win_service and win_copy
// stop its running dependents first, deepest first, and start them again
// afterwards in dependency order. stopOrder is the one function that says
// which services that takes: Plan shows its answer (Change.Restarts) and
// Apply stops exactly those.

// stopOrder is what stopping name takes down, in the order to stop it: its
// dependents that are running (directly or through others, deepest first),
// then name. Starting them again goes in reverse.
func stopOrder(ctx context.Context, h host.Host, name string) ([]string, error) {
	deps, err := h.DependentServices(ctx, name)
	if err != nil {
		return nil, err
	}
	var order []string
	for _, d := range deps {
		if isActive(d.State) {
			order = append(order, d.Name)
		}
	}
	return append(order, name), nil
}

// stopInOrder stops each service of order, one after another, each waited
// for until its process has exited, and returns the ones that were running
// (in that order): those are the ones to start again. A service already
// stopped, or gone, is left alone; one already stopping is waited for but
// not started afterwards. On a failure it returns what it stopped so far,
// for the caller to start again.
func stopInOrder(ctx context.Context, h host.Host, order []string) ([]string, error) {
	var stopped, seen []string
	for _, name := range order {
		if slices.ContainsFunc(seen, func(s string) bool { return strings.EqualFold(s, name) }) {
			continue
		}
		seen = append(seen, name)
		info, err := h.QueryService(ctx, name)
		if err != nil {
			return stopped, fmt.Errorf("query service %s: %w", name, err)
		}
		if !info.Exists || info.State == host.ServiceStopped {
			continue
		}
		if err := h.StopService(ctx, name, serviceTimeout); err != nil {
			return stopped, err
		}
		if isActive(info.State) {
			stopped = append(stopped, name)
		}
	}
	return stopped, nil
}

// startAgain starts the services stopInOrder stopped, in reverse order
// (each after the services it depends on), whatever happened in between:
// a node whose services run keeps working, and a service that cannot start
// is reported rather than left stopped silently. It goes on past a failure,
// so one broken service does not keep the others down.
func startAgain(ctx context.Context, h host.Host, cfg modules.Config, attr string, stopped []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for i := len(stopped) - 1; i >= 0; i-- {
		if err := startAndWait(ctx, h, stopped[i]); err != nil {
			diags = append(diags, hostError(cfg, attr, fmt.Sprintf("Cannot start service %s again", stopped[i]), err)...)
		}
	}
	return diags
}

// startAndWait starts a service and waits until it reports running, so the
// next plan sees it settled.
func startAndWait(ctx context.Context, h host.Host, name string) error {
	if err := h.StartService(ctx, name); err != nil {
		return err
	}
	return h.WaitService(ctx, name, host.ServiceRunning, serviceTimeout)
}
