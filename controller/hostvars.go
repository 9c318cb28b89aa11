package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// The trust boundary of an instance's inventory variables. Whoever may
// write a WindowsInstance may say where its host is and how patiently to
// reach it (api/v1alpha1's InstanceHostVars, also the CRD's rule), nothing
// more: which transport runs the playbook, the key it logs in with, which
// host keys it trusts and what binary it uploads as the agent are the
// controller's to decide, or an admin's (Options.HostVars and
// Options.AddressHostVars, the controller's flags). The controller's own
// settings (controllerHostVar) are applied after everyone else's, and an
// admin's options may not name them either.

// ReasonHostVarRefused is the Valid condition's reason, and the event's,
// when spec.hostVars sets a variable an instance may not set.
const ReasonHostVarRefused = "HostVarRefused"

// controllerHostVar says whether the controller decides the variable k
// itself: the transport, the login key, the known_hosts file and the
// pinned host key or trust on first use. Neither an instance nor an
// admin's --host-var may set these.
func controllerHostVar(k string) bool {
	switch k {
	case "connection", "ansible_connection",
		kubeinv.KeyVar, "private_key_file", "ansible_ssh_private_key_file", "ansible_private_key_file",
		kubeinv.NewKeyVar, "ssh_known_hosts_file", "ssh_host_key", "ssh_trust_on_first_use":
		return true
	}
	return false
}

// checkAdminHostVars refuses options that set a variable the controller
// decides (Options.check).
func (o *Options) checkAdminHostVars() error {
	bad := func(vars map[string]string) []string {
		var out []string
		for _, k := range sortedKeys(vars) {
			if controllerHostVar(k) {
				out = append(out, k)
			}
		}
		return out
	}
	if b := bad(o.HostVars); len(b) > 0 {
		return fmt.Errorf("controller: --host-var %s: the controller sets %s itself (the connection, the key from the instance's Secret, its known_hosts file and pinned host key)", strings.Join(b, ", "), plural(b, "it", "them"))
	}
	for _, addr := range sortedKeys(o.AddressHostVars) {
		if b := bad(o.AddressHostVars[addr]); len(b) > 0 {
			return fmt.Errorf("controller: --address-host-var %s: %s: the controller sets %s itself (the connection, the key from the instance's Secret, its known_hosts file and pinned host key)", addr, strings.Join(b, ", "), plural(b, "it", "them"))
		}
	}
	for _, j := range o.AllowedJumpHosts {
		if strings.TrimSpace(j) == "" || strings.Contains(j, ",") {
			return fmt.Errorf("controller: --allowed-jump-hosts: %q is not one jump host ([user@]host[:port])", j)
		}
	}
	return nil
}

func plural(list []string, one, many string) string {
	if len(list) == 1 {
		return one
	}
	return many
}

// HostVarsRefused is the error for an instance whose spec.hostVars sets
// variables it may not: the condition's and the event's message.
type HostVarsRefused struct {
	// Names are the variables an instance may not set at all.
	Names []string
	// JumpHost is a proxy_jump value that is not one of the allowed jump
	// hosts ("" when proxy_jump is fine or unset).
	JumpHost string
	// Allowed are the controller's allowed jump hosts.
	Allowed []string
}

func (e *HostVarsRefused) Error() string {
	var parts []string
	if len(e.Names) > 0 {
		parts = append(parts, fmt.Sprintf("spec.hostVars may not set %s: an instance may set only %s; the controller decides the connection, the key, the known_hosts file, the host key and the agent (an admin sets other variables with the controller's --host-var)",
			strings.Join(e.Names, ", "), strings.Join(wsuv1.InstanceHostVars(), ", ")))
	}
	if e.JumpHost != "" {
		allowed := "none are allowed"
		if len(e.Allowed) > 0 {
			allowed = "allowed: " + strings.Join(e.Allowed, ", ")
		}
		parts = append(parts, fmt.Sprintf("spec.hostVars.%s %q is not one of the controller's --allowed-jump-hosts (%s)", wsuv1.JumpHostVar, e.JumpHost, allowed))
	}
	return strings.Join(parts, "; ")
}

// checkHostVars refuses an instance's spec.hostVars that set a variable
// outside wsuv1.InstanceHostVars, or a jump host the controller does not
// allow: the API server refuses the first already (the CRD's rule), but
// an object stored before the rule, or a CRD without it, must not get past
// the controller either.
func (r *InstanceReconciler) checkHostVars(wi *wsuv1.WindowsInstance) error {
	allowed := wsuv1.InstanceHostVars()
	e := &HostVarsRefused{}
	for _, k := range sortedKeys(wi.Spec.HostVars) {
		if !slices.Contains(allowed, k) {
			e.Names = append(e.Names, k)
		}
	}
	if j, ok := wi.Spec.HostVars[wsuv1.JumpHostVar]; ok && !slices.Contains(r.Options.AllowedJumpHosts, j) {
		e.JumpHost, e.Allowed = j, r.Options.AllowedJumpHosts
		if j == "" {
			e.JumpHost = `""`
		}
	}
	if len(e.Names) == 0 && e.JumpHost == "" {
		return nil
	}
	return e
}

// ReasonPlaybookRefused is the Valid condition's reason, and the event's,
// when spec.playbook.configMap names a site playbook and the controller
// was not started with --allow-playbook-configmaps.
const ReasonPlaybookRefused = "PlaybookConfigMapRefused"

// PlaybookRefused is checkSpec's error for a site playbook the controller
// does not run.
type PlaybookRefused struct{ ConfigMap string }

func (e *PlaybookRefused) Error() string {
	return fmt.Sprintf("spec.playbook.configMap %q: this controller runs no playbook from a ConfigMap (a site playbook acts on the cluster with the controller's rights; an admin turns them on with --allow-playbook-configmaps)", e.ConfigMap)
}

// checkSpec refuses a spec the controller will not act on: hostVars it
// may not set, or a site playbook it does not run.
func (r *InstanceReconciler) checkSpec(wi *wsuv1.WindowsInstance) error {
	if err := r.checkHostVars(wi); err != nil {
		return err
	}
	if cm := wi.Spec.Playbook.ConfigMap; cm != "" && !r.Options.AllowPlaybookConfigMaps {
		return &PlaybookRefused{ConfigMap: cm}
	}
	return nil
}

// setHostVars gives h its variables in order of trust, the most trusted
// last: the admin's for every host, the admin's for this address, the
// instance's own (checked), then the controller's: the login key,
// the instance's known_hosts file, and its pinned host key or, before the
// first connection, trust on first use.
func (r *InstanceReconciler) setHostVars(h *inventory.Host, wi *wsuv1.WindowsInstance, key, knownHosts string) error {
	if err := r.checkHostVars(wi); err != nil {
		return err
	}
	for _, vars := range []map[string]string{r.Options.HostVars, r.Options.AddressHostVars[wi.Spec.Address], wi.Spec.HostVars} {
		for _, k := range sortedKeys(vars) {
			if controllerHostVar(k) {
				continue // Options.check and checkHostVars refused it already
			}
			h.Vars[k] = inventory.Var{Value: cty.StringVal(vars[k])}
		}
	}
	h.Vars["connection"] = inventory.Var{Value: cty.StringVal("ssh")}
	h.Vars[kubeinv.KeyVar] = inventory.Var{Value: cty.StringVal(key).Mark(engine.Sensitive)}
	h.Vars["ssh_known_hosts_file"] = inventory.Var{Value: cty.StringVal(knownHosts)}
	if pinned := wi.Status.Identity.HostKey; pinned != "" {
		h.Vars["ssh_host_key"] = inventory.Var{Value: cty.StringVal(pinned)}
		h.Vars["ssh_trust_on_first_use"] = inventory.Var{Value: cty.StringVal("false")}
	} else {
		h.Vars["ssh_trust_on_first_use"] = inventory.Var{Value: cty.StringVal("true")}
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
