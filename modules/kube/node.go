package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	"github.com/wsu-project/wsu/modules"
)

// Node sets labels, annotations and taints on a Node.
type Node struct{ Clusters }

var (
	_ modules.Module    = Node{}
	_ modules.Validator = Node{}
)

var (
	taintType    = cty.Object(map[string]cty.Type{"key": cty.String, "value": cty.String, "effect": cty.String})
	taintArgType = cty.ObjectWithOptionalAttrs(map[string]cty.Type{"key": cty.String, "value": cty.String, "effect": cty.String}, []string{"value"})
	taintRefType = cty.ObjectWithOptionalAttrs(map[string]cty.Type{"key": cty.String, "effect": cty.String}, []string{"effect"})
)

var nodeAttrs = withConn(append([]modules.Attribute{
	{Name: "name", Type: cty.String, Required: true, Description: "Name of the Node."},
	{Name: "labels", Type: cty.Map(cty.String),
		Description: "Labels to set; a `null` value removes the label. Labels not named here are left alone."},
	{Name: "annotations", Type: cty.Map(cty.String),
		Description: "Annotations to set; a `null` value removes the annotation. Others are left alone."},
	{Name: "taints", Type: cty.List(taintArgType),
		Description: "Taints the node must have, each `{ key, value, effect }` (`value` optional; `effect` one of " +
			"`NoSchedule`, `PreferNoSchedule`, `NoExecute`). A taint is identified by key and effect, as kubectl " +
			"does: an existing one with another value is updated. Other taints are left alone."},
	{Name: "remove_taints", Type: cty.List(taintRefType),
		Description: "Taints to remove, each `{ key, effect }`; without `effect`, every taint with that key goes."},
}, ownerAttrs...)...)

var nodeResults = []modules.Attribute{
	{Name: "labels", Type: cty.Map(cty.String), Description: "All of the node's labels afterwards."},
	{Name: "annotations", Type: cty.Map(cty.String), Description: "All of the node's annotations afterwards."},
	{Name: "taints", Type: cty.List(taintType), Description: "All of the node's taints afterwards (`value` is \"\" when unset)."},
}

func (Node) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node",
		Summary: "Set or remove labels, annotations and taints on a Node.",
		Description: "Manages only the keys it names, like `kubectl label` / `annotate` / `taint`: the plan " +
			"lists each label, annotation and taint that differs, and apply changes them in one patch " +
			"guarded by the node's resourceVersion (a concurrent change makes it re-read and retry). " +
			"The node must exist when the task is applied; a plan made before the kubelet registers it " +
			"shows every named key as added." + ownedOnlyNote,
		Target:     modules.TargetController,
		Attributes: nodeAttrs,
		Results:    nodeResults,
		Example: `task "version" {
  k8s_node {
    name        = lower(host.facts.hostname)
    labels      = { "node.openshift.io/os_id" = "Windows" }
    annotations = { "windowsmachineconfig.openshift.io/version" = var.version }
    taints      = [{ key = "os", value = "Windows", effect = "NoSchedule" }]
  }
}`,
	}
}

var taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

func (Node) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "name")
	for _, attr := range []string{"labels", "annotations"} {
		v := get(cfg, attr)
		if !v.IsKnown() || v.IsNull() {
			continue
		}
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			key := k.AsString()
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				diags = append(diags, cfg.Error(attr, "Invalid key", fmt.Sprintf("%q: %s.", key, strings.Join(errs, "; "))))
			}
			if s, ok := str(val); ok && attr == "labels" {
				if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
					diags = append(diags, cfg.Error(attr, "Invalid label value", fmt.Sprintf("%s=%q: %s.", key, s, strings.Join(errs, "; "))))
				}
			}
		}
	}
	for _, attr := range []string{"taints", "remove_taints"} {
		v := get(cfg, attr)
		if !v.IsKnown() || v.IsNull() {
			continue
		}
		for i, el := range v.AsValueSlice() {
			if !el.IsKnown() {
				continue
			}
			if isNull(el) {
				diags = append(diags, cfg.Error(attr, "Null taint", fmt.Sprintf("%s[%d] is null.", attr, i)))
				continue
			}
			if key, ok := str(el.GetAttr("key")); ok {
				if errs := validation.IsQualifiedName(key); len(errs) > 0 {
					diags = append(diags, cfg.Error(attr, "Invalid taint key", fmt.Sprintf("%s[%d] key %q: %s.", attr, i, key, strings.Join(errs, "; "))))
				}
			} else if isNull(el.GetAttr("key")) {
				diags = append(diags, cfg.Error(attr, "Missing taint key", fmt.Sprintf("%s[%d] needs a key.", attr, i)))
			}
			eff := el.GetAttr("effect")
			if e, ok := str(eff); ok && !slices.Contains(taintEffects, e) {
				diags = append(diags, cfg.Error(attr, "Invalid taint effect",
					fmt.Sprintf("%s[%d] effect %q must be one of %s.", attr, i, e, strings.Join(taintEffects, ", "))))
			} else if isNull(eff) && attr == "taints" {
				diags = append(diags, cfg.Error(attr, "Missing taint effect", fmt.Sprintf("taints[%d] needs an effect (%s).", i, strings.Join(taintEffects, ", "))))
			}
			if attr == "taints" {
				if s, ok := str(el.GetAttr("value")); ok {
					if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
						diags = append(diags, cfg.Error(attr, "Invalid taint value", fmt.Sprintf("taints[%d] value %q: %s.", i, s, strings.Join(errs, "; "))))
					}
				}
			}
		}
	}
	return diags
}

// nodeSpec is the decoded desired state; a nil map value removes the key.
type nodeSpec struct {
	labels, annotations map[string]*string
	taints              []corev1.Taint
	remove              []corev1.Taint // Effect "" matches every effect
}

func decodeStrMap(v cty.Value) map[string]*string {
	if v.IsNull() {
		return nil
	}
	m := map[string]*string{}
	for it := v.ElementIterator(); it.Next(); {
		k, val := it.Element()
		if val.IsNull() {
			m[k.AsString()] = nil
		} else {
			s := val.AsString()
			m[k.AsString()] = &s
		}
	}
	return m
}

// decodeNodeSpec needs a wholly known configuration.
func decodeNodeSpec(cfg modules.Config) nodeSpec {
	s := nodeSpec{labels: decodeStrMap(get(cfg, "labels")), annotations: decodeStrMap(get(cfg, "annotations"))}
	if v := get(cfg, "taints"); !v.IsNull() {
		for _, el := range v.AsValueSlice() {
			t := corev1.Taint{Key: el.GetAttr("key").AsString(), Effect: corev1.TaintEffect(el.GetAttr("effect").AsString())}
			if val, ok := str(el.GetAttr("value")); ok {
				t.Value = val
			}
			s.taints = append(s.taints, t)
		}
	}
	if v := get(cfg, "remove_taints"); !v.IsNull() {
		for _, el := range v.AsValueSlice() {
			t := corev1.Taint{Key: el.GetAttr("key").AsString()}
			if e, ok := str(el.GetAttr("effect")); ok {
				t.Effect = corev1.TaintEffect(e)
			}
			s.remove = append(s.remove, t)
		}
	}
	return s
}

func taintID(t corev1.Taint) string { return t.Key + ":" + string(t.Effect) }

// nodeDiff is what has to change on one node.
type nodeDiff struct {
	labels, annotations map[string]*string // only differing keys
	taints              []corev1.Taint     // the full new list when changed
	taintsChanged       bool
	fields              []modules.FieldChange
}

func (d nodeDiff) empty() bool { return len(d.fields) == 0 }

func strPtrVal(p *string) cty.Value {
	if p == nil {
		return cty.NullVal(cty.String)
	}
	return cty.StringVal(*p)
}

func diffMap(attr string, have map[string]string, want map[string]*string, fields *[]modules.FieldChange) map[string]*string {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]*string{}
	for _, k := range keys {
		cur, exists := have[k]
		w := want[k]
		if (w == nil && !exists) || (w != nil && exists && cur == *w) {
			continue
		}
		out[k] = w
		old := cty.NullVal(cty.String)
		if exists {
			old = cty.StringVal(cur)
		}
		*fields = append(*fields, modules.FieldChange{Name: fmt.Sprintf("%s[%q]", attr, k), Old: old, New: strPtrVal(w)})
	}
	return out
}

// diffNode compares a node (nil when it does not exist) with the spec.
func diffNode(n *corev1.Node, s nodeSpec) nodeDiff {
	var d nodeDiff
	var labels, annotations map[string]string
	var taints []corev1.Taint
	if n != nil {
		labels, annotations, taints = n.Labels, n.Annotations, n.Spec.Taints
	}
	d.labels = diffMap("labels", labels, s.labels, &d.fields)
	d.annotations = diffMap("annotations", annotations, s.annotations, &d.fields)

	newTaints := slices.Clone(taints)
	for _, r := range s.remove {
		newTaints = slices.DeleteFunc(newTaints, func(t corev1.Taint) bool {
			if t.Key != r.Key || (r.Effect != "" && t.Effect != r.Effect) {
				return false
			}
			d.fields = append(d.fields, modules.FieldChange{Name: fmt.Sprintf("taints[%q]", taintID(t)), Old: cty.StringVal(t.Value), New: cty.NullVal(cty.String)})
			return true
		})
	}
	for _, w := range s.taints {
		i := slices.IndexFunc(newTaints, func(t corev1.Taint) bool { return t.Key == w.Key && t.Effect == w.Effect })
		switch {
		case i < 0:
			newTaints = append(newTaints, w)
			d.fields = append(d.fields, modules.FieldChange{Name: fmt.Sprintf("taints[%q]", taintID(w)), Old: cty.NullVal(cty.String), New: cty.StringVal(w.Value)})
		case newTaints[i].Value != w.Value:
			d.fields = append(d.fields, modules.FieldChange{Name: fmt.Sprintf("taints[%q]", taintID(w)), Old: cty.StringVal(newTaints[i].Value), New: cty.StringVal(w.Value)})
			newTaints[i].Value = w.Value
		}
	}
	d.taintsChanged = !slices.EqualFunc(taints, newTaints, func(a, b corev1.Taint) bool {
		return a.Key == b.Key && a.Effect == b.Effect && a.Value == b.Value
	})
	d.taints = newTaints
	return d
}

// after is the node as it will be once d is applied, for the result.
func (d nodeDiff) after(n *corev1.Node) cty.Value {
	labels, annotations := map[string]string{}, map[string]string{}
	var taints []corev1.Taint
	if n != nil {
		maps.Copy(labels, n.Labels)
		maps.Copy(annotations, n.Annotations)
		taints = n.Spec.Taints
	}
	applyMap(labels, d.labels)
	applyMap(annotations, d.annotations)
	if d.taintsChanged {
		taints = d.taints
	}
	return nodeResult(labels, annotations, taints)
}

// applyMap sets or (nil) removes keys.
func applyMap(dst map[string]string, changes map[string]*string) {
	for k, v := range changes {
		if v == nil {
			delete(dst, k)
		} else {
			dst[k] = *v
		}
	}
}

func nodeResult(labels, annotations map[string]string, taints []corev1.Taint) cty.Value {
	strMap := func(m map[string]string) cty.Value {
		if len(m) == 0 {
			return cty.MapValEmpty(cty.String)
		}
		vals := make(map[string]cty.Value, len(m))
		for k, v := range m {
			vals[k] = cty.StringVal(v)
		}
		return cty.MapVal(vals)
	}
	tl := cty.ListValEmpty(taintType)
	if len(taints) > 0 {
		vals := make([]cty.Value, len(taints))
		for i, t := range taints {
			vals[i] = cty.ObjectVal(map[string]cty.Value{
				"key": cty.StringVal(t.Key), "value": cty.StringVal(t.Value), "effect": cty.StringVal(string(t.Effect))})
		}
		tl = cty.ListVal(vals)
	}
	return result(nodeResults, map[string]cty.Value{"labels": strMap(labels), "annotations": strMap(annotations), "taints": tl})
}

// patch is a JSON merge patch making d's changes, guarded by the node's
// resourceVersion so that a concurrent change is not overwritten.
func (d nodeDiff) patch(resourceVersion string) ([]byte, error) {
	meta := map[string]any{"resourceVersion": resourceVersion}
	if len(d.labels) > 0 {
		meta["labels"] = d.labels // nil values marshal as null: removed
	}
	if len(d.annotations) > 0 {
		meta["annotations"] = d.annotations
	}
	p := map[string]any{"metadata": meta}
	if d.taintsChanged {
		taints := d.taints
		if taints == nil {
			taints = []corev1.Taint{}
		}
		p["spec"] = map[string]any{"taints": taints}
	}
	return json.Marshal(p)
}

func (m Node) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, nameOK := str(get(cfg, "name"))
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeResults), Diagnostics: diags}
	}
	specKnown := true
	for _, a := range []string{"labels", "annotations", "taints", "remove_taints"} {
		specKnown = specKnown && get(cfg, a).IsWhollyKnown()
	}
	if !known || !nameOK || !specKnown {
		subject := knownAfterApply
		if nameOK {
			subject = "node " + name
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject}, Result: unknownResult(nodeResults)}
	}
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	subject := "node " + name
	switch {
	case apierrors.IsNotFound(err):
		n, subject = nil, "node "+name+" (not registered yet)"
	case err != nil:
		return modules.PlanResponse{Result: unknownResult(nodeResults), Diagnostics: apiError(cfg, "name", "Cannot read node "+name, err)}
	}
	if diags := refuseNode(cfg, n); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeResults), Diagnostics: diags}
	}
	d := diffNode(n, decodeNodeSpec(cfg))
	if d.empty() {
		return modules.PlanResponse{Result: d.after(n)}
	}
	res := d.after(n)
	if n == nil {
		res = unknownResult(nodeResults) // the kubelet adds its own labels
	}
	return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: d.fields}, Result: res}
}

func (m Node) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodeAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	spec := decodeNodeSpec(cfg)
	nodes := cl.Kube.CoreV1().Nodes()
	var out cty.Value
	var refused hcl.Diagnostics
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if refused = refuseNode(cfg, n); refused.HasErrors() {
			return nil
		}
		d := diffNode(n, spec)
		if d.empty() {
			out = d.after(n)
			return nil
		}
		p, err := d.patch(n.ResourceVersion)
		if err != nil {
			return err
		}
		n, err = nodes.Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		out = nodeResult(n.Labels, n.Annotations, n.Spec.Taints)
		return nil
	})
	if err != nil {
		summary := "Cannot update node " + name
		if apierrors.IsNotFound(err) {
			summary = "Node " + name + " does not exist"
		}
		return modules.ApplyResponse{Result: unknownResult(nodeResults), Diagnostics: apiError(cfg, "name", summary, err)}
	}
	if refused.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeResults), Diagnostics: refused}
	}
	return modules.ApplyResponse{Result: out}
}
