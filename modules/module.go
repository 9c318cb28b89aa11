// Package modules defines what a wsu module is and keeps the registry of them.
//
// A module is one idempotent thing (a file, a directory, a service, a command
// guarded by creates/removes). Its Plan reads the current state and says what
// would change; Apply does exactly that. The shape follows Terraform's
// request/response provider API: adding a field to a request never breaks a
// module.
package modules

import (
	"context"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
)

// Module is implemented by every module.
type Module interface {
	Schema() Schema
	// Plan reads the current state and returns the Change that would bring it
	// to the desired state, or a nil Change when it is already there. Plan
	// never changes anything.
	Plan(ctx context.Context, req PlanRequest) PlanResponse
	// Apply performs the Change Plan returned, and nothing else.
	Apply(ctx context.Context, req ApplyRequest) ApplyResponse
}

// Validator is implemented by modules that can check their configuration
// without touching a host (relative paths, conflicting options). The
// static checker calls it at load time, when unknown values are possible,
// and the engine again (through Validate) with the real values before
// Plan.
type Validator interface {
	Validate(req ValidateRequest) hcl.Diagnostics
}

// Validate runs m's Validate, if m has one. It is the one place a
// configuration is checked before Plan and Apply: the engine calls it for
// every task instance, before connecting, and never calls Plan or Apply
// after an error. So Plan and Apply take a valid configuration for
// granted, and, for a TargetHost module, a non-nil Host; tests calling a
// module directly go through modules/moduletest, which keeps both promises
// the same way.
func Validate(m Module, cfg Config) hcl.Diagnostics {
	if v, ok := m.(Validator); ok {
		return v.Validate(ValidateRequest{Config: cfg})
	}
	return nil
}

// Target says where a module does its work.
type Target string

const (
	// TargetHost modules act on the managed host through req.Host.
	TargetHost Target = "host"
	// TargetController modules run where wsu runs and never touch the host
	// (print, assert, cluster modules). A play of only these needs no
	// connection.
	TargetController Target = "controller"
)

// Schema describes a module for the engine, the docs and `wsu modules`.
type Schema struct {
	Name        string
	Summary     string // one line
	Description string // markdown paragraphs
	Target      Target
	Attributes  []Attribute // the block's arguments
	Results     []Attribute // the task result's attributes
	Example     string      // an HCL task block
	// Show names a result attribute the views display after the task, as
	// Ansible shows debug output (print's msg).
	Show string
}

// Attribute describes one argument or one result attribute.
type Attribute struct {
	Name     string
	Type     cty.Type
	Required bool
	// Default applies when the argument is absent; cty.NilVal means null.
	Default   cty.Value
	Sensitive bool
	// DerivesFrom, on a result attribute, names the only arguments its
	// value is computed from; set (even to an empty list) it means the
	// value reveals nothing of any other argument. The engine hides a
	// result derived from a sensitive argument, and without DerivesFrom
	// it must assume every result is (a hash of a short secret is as good
	// as the secret); with it, the result stays visible unless one of the
	// arguments it names is sensitive. k8s_discovery shows the server and
	// the CA's pin it found with a token this way.
	DerivesFrom []string
	// Credential, on an argument, says it only authenticates the module
	// to a system (a cluster module's kubeconfig_data): the argument is
	// hidden when its value is sensitive, but no change field or result
	// derives from it, so a task's plan still shows what it reads and
	// changes.
	Credential bool
	// Local says the argument names a file (or, in a map, files) on the
	// machine running wsu that the module reads: a confined run (a site
	// playbook from a ConfigMap) refuses one outside the directories it
	// may read, before the module sees it.
	Local       bool
	Description string
}

// Attribute returns the named argument's description, or nil.
func (s Schema) Attribute(name string) *Attribute {
	for i := range s.Attributes {
		if s.Attributes[i].Name == name {
			return &s.Attributes[i]
		}
	}
	return nil
}

// ResultType is the object type of the module's task result.
func (s Schema) ResultType() cty.Type {
	attrs := make(map[string]cty.Type, len(s.Results))
	for _, a := range s.Results {
		attrs[a.Name] = a.Type
	}
	return cty.Object(attrs)
}

// Config is a module block's decoded arguments, with the source ranges the
// engine knows so that a module can point its diagnostics at the argument.
type Config struct {
	// Value is an object with every attribute of the schema, defaults
	// applied. Attributes may be unknown during plan; sensitive marks are
	// removed (the engine re-applies them to what it shows).
	Value cty.Value
	// Block is the range of the module block; Ranges holds each argument
	// that was set explicitly.
	Block  hcl.Range
	Ranges map[string]hcl.Range
}

// Get returns an attribute of the configuration.
func (c Config) Get(name string) cty.Value {
	if c.Value.IsNull() || !c.Value.IsKnown() {
		return cty.DynamicVal
	}
	return c.Value.GetAttr(name)
}

// Range returns the source range of an argument, or of the block when the
// argument was not set explicitly.
func (c Config) Range(name string) *hcl.Range {
	if r, ok := c.Ranges[name]; ok {
		return &r
	}
	r := c.Block
	return &r
}

// Error builds an error diagnostic located at an argument.
func (c Config) Error(attr, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: c.Range(attr)}
}

// Warning builds a warning diagnostic located at an argument.
func (c Config) Warning(attr, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail, Subject: c.Range(attr)}
}

// ValidateRequest asks a module to check its configuration statically.
type ValidateRequest struct {
	Config Config
}

// PlanRequest asks a module what it would change.
type PlanRequest struct {
	Config Config
	// Host is nil for TargetController modules.
	Host host.Host
	// Pending is set in a plan (dry run) when earlier tasks on this host
	// have changes that were not applied: what the module reads may not
	// show them yet (a handler restarting a service the plan creates).
	Pending bool
	// Redial opens a second connection to the host (nil when the run has
	// none to offer); see Redialer.
	Redial Redialer
	// Diff asks for Change.Content where the module offers it (a plan, or
	// apply --diff): reading a file's old content costs a round trip that
	// an apply nobody watches need not make.
	Diff bool
}

// Redialer opens a second connection to the task's host the way the engine
// opened the first, with some of the host's inventory variables replaced:
// a null value removes one. The caller closes the host it returns. A
// module uses it to prove something about how the host is reached
// (ssh_key_check logs in with a new key) without disturbing the task's
// own connection.
type Redialer func(ctx context.Context, vars map[string]cty.Value) (host.Host, error)

// PlanResponse is a module's answer to Plan.
type PlanResponse struct {
	// Change is nil when the host is already in the desired state.
	Change *Change
	// Result is the task result as far as it is known before Apply; apply-
	// only attributes are cty unknown. With a nil Change, Apply is never
	// called, so the result should be known unless the configuration itself
	// holds unknown values (print of a value known only after apply).
	Result      cty.Value
	Diagnostics hcl.Diagnostics
}

// ApplyRequest asks a module to perform a planned change.
type ApplyRequest struct {
	Config Config
	Host   host.Host
	Change *Change
	// Redial is PlanRequest.Redial.
	Redial Redialer
}

// ApplyResponse is a module's answer to Apply.
type ApplyResponse struct {
	Result      cty.Value
	Diagnostics hcl.Diagnostics
	// Reconnect: the task's connection no longer reaches the host (it
	// restarted: win_reboot). The engine closes it; the next task connects
	// afresh and reads the host's facts again.
	Reconnect bool
}

// Action is the kind of a Change.
type Action string

const (
	Create  Action = "create"
	Update  Action = "update"
	Delete  Action = "delete"
	Replace Action = "replace" // delete then create
	Run     Action = "run"     // a command or cluster action that will execute
)

// Symbol is the one-or-three character prefix plans show for the action.
func (a Action) Symbol() string {
	switch a {
	case Create:
		return "+"
	case Update:
		return "~"
	case Delete:
		return "-"
	case Replace:
		return "-/+"
	case Run:
		return "!"
	}
	return "?"
}

// Change is what Plan says Apply will do.
type Change struct {
	Action Action
	// Subject names the thing changed: a path, a service, a command line.
	// With Content, it is the file name the unified diff shows (--- and
	// +++ lines), so it is the file's path on the host.
	Subject string
	Fields  []FieldChange
	// Restarts lists services Apply will stop and start again to make the
	// change (e.g. replacing a running service's binary).
	Restarts []string
	// Private carries module data from Plan to Apply (what was observed).
	// It is never shown.
	Private map[string]string
	// Content is a file's content before and after, for the unified diff
	// the views show (PlanRequest.Diff); nil when the module offers none.
	// The engine shows no diff for a task with a sensitive argument, nor
	// for binary or large content, and never fingerprints it: the
	// content's sha256 field stands for it.
	Content *ContentChange
}

// MaxDiffBytes bounds each side of a content diff: a larger file is
// compared by its sha256 alone (and its old content is not read).
const MaxDiffBytes = 64 << 10

// ContentChange is a file's content before and after a change. Old is ""
// for a new file. Omitted, when set, says why there is no diff (the old
// file is larger than MaxDiffBytes, or could not be read).
type ContentChange struct {
	Old, New string
	Omitted  string
}

// FieldChange is one attribute's old and new value. Either may be null
// (absent) or unknown (known after apply).
type FieldChange struct {
	Name      string
	Old       cty.Value
	New       cty.Value
	Sensitive bool
}
