package deploy

// The Helm chart (helm/wsu) is generated from the kustomize renders, never
// written by hand, so the two installs cannot drift apart: the base is the
// render of overlays/kubernetes, and what a variant render adds becomes a
// block guarded by the value that selects it (runMode: job adds what
// components/job-mode adds; serviceMonitor.enabled what
// components/prometheus adds). The generator then replaces what an admin
// sets — the namespace (the release's), the images and pull policy, the
// controller's resources and the flags docs/controller.md lists for a site
// — by template expressions whose default values give the kustomize render
// back. TestChart fails when the checked-in chart is stale (make chart).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/version"
)

// ChartDir is the chart, relative to deploy/.
const ChartDir = "helm/wsu"

// chartSource is the overlay the chart's default render equals.
const chartSource = "overlays/kubernetes"

// Conditions of the chart's guarded blocks.
const (
	condJobMode        = `eq .Values.runMode "job"`
	condServiceMonitor = `.Values.serviceMonitor.enabled`
	condNamespace      = `.Values.namespace.create`
)

// ChartFiles generates the chart: each file's path relative to ChartDir
// and its content. dir is deploy/ (absolute, or relative to the working
// directory).
func ChartFiles(dir string) (map[string][]byte, error) {
	base, err := renderObjects(filepath.Join(dir, chartSource))
	if err != nil {
		return nil, err
	}
	job, err := renderObjects(filepath.Join(dir, "overlays/kubernetes-job-mode"))
	if err != nil {
		return nil, err
	}
	prom, err := renderWithComponent(dir, chartSource, "components/prometheus")
	if err != nil {
		return nil, err
	}
	g := &chartGen{}
	objs, err := g.variants(base, job, prom)
	if err != nil {
		return nil, err
	}
	dep := find(base, "Deployment", "wsu-controller")
	if dep == nil {
		return nil, fmt.Errorf("chart: %s has no Deployment wsu-controller", chartSource)
	}
	ctr, err := controllerContainer(dep.obj)
	if err != nil {
		return nil, err
	}
	img, err := parseImage(fmt.Sprint(ctr["image"]))
	if err != nil {
		return nil, err
	}
	payload, err := payloadImage(dep.obj)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{
		"Chart.yaml":             []byte(chartYAML()),
		"templates/_helpers.tpl": []byte(helpersTPL),
		"templates/NOTES.txt":    []byte(notesTXT),
	}
	values, err := valuesYAML(img, payload, ctr["resources"])
	if err != nil {
		return nil, err
	}
	out["values.yaml"] = []byte(values)
	out["values.schema.json"] = []byte(valuesSchema)
	repl := g.replacer(img, payload)
	seen := map[string]bool{}
	for _, o := range objs {
		switch o.kind {
		case "Deployment":
			if o.name == "wsu-controller" {
				if err := g.parametriseController(o); err != nil {
					return nil, err
				}
			}
		case "CustomResourceDefinition":
			keepOnUninstall(o.obj)
		}
		text, err := g.template(o)
		if err != nil {
			return nil, err
		}
		name := o.kind + "-" + o.name
		if o.namespace != "" && o.namespace != KubernetesNamespace {
			name += "." + o.namespace
		}
		name = "templates/" + fileNameRE.ReplaceAllString(strings.ToLower(name), "-") + ".yaml"
		if seen[name] {
			return nil, fmt.Errorf("chart: two objects make %s", name)
		}
		seen[name] = true
		text = pullPolicies(text, img, payload)
		if strings.Contains(text, "IfNotPresent") {
			return nil, fmt.Errorf("chart: %s: an imagePullPolicy not right after its image", name)
		}
		out[name] = []byte(repl.Replace(text))
	}
	return out, nil
}

// WriteChart writes the chart's files under dir/ChartDir, removing the
// files it no longer makes.
func WriteChart(dir string, files map[string][]byte) error {
	root := filepath.Join(dir, ChartDir)
	old, err := ChartOnDisk(dir)
	if err != nil {
		return err
	}
	for name := range old {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(root, name)); err != nil {
				return err
			}
		}
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ChartOnDisk reads the checked-in chart's files, by path relative to
// ChartDir (none when it is absent).
func ChartOnDisk(dir string) (map[string][]byte, error) {
	root := filepath.Join(dir, ChartDir)
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) && p == root {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	return out, err
}

// object is one rendered object, with the condition that guards all of
// it ("" for none).
type object struct {
	kind, name, namespace string
	obj                   map[string]any
	cond                  string
}

func (o *object) key() string { return o.kind + "/" + o.namespace + "/" + o.name }

func find(objs []*object, kind, name string) *object {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o
		}
	}
	return nil
}

// renderObjects renders a kustomization into objects, in kubectl's order.
func renderObjects(dir string) ([]*object, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out []*object
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, err
		}
		out = append(out, &object{kind: r.GetKind(), name: r.GetName(), namespace: r.GetNamespace(), obj: m})
	}
	return out, nil
}

// renderWithComponent renders overlay with a component added, as a site's
// kustomization naming both would.
func renderWithComponent(dir, overlay, component string) ([]*object, error) {
	tmp, err := os.MkdirTemp("", "wsu-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rel := func(p string) (string, error) {
		abs, err := filepath.Abs(filepath.Join(dir, p))
		if err != nil {
			return "", err
		}
		return filepath.Rel(tmp, abs)
	}
	o, err := rel(overlay)
	if err != nil {
		return nil, err
	}
	c, err := rel(component)
	if err != nil {
		return nil, err
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\ncomponents: [%q]\n", o, c)
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	return renderObjects(tmp)
}

// chartGen holds the blocks that the marshalled objects' sentinels stand
// for: sentinel i is replaced by blocks[i] given the indentation of its
// line.
type chartGen struct {
	blocks []func(indent string) string
}

// fileNameRE matches what a template's file name may not hold (RBAC
// names have colons, which Windows and module zips refuse).
var fileNameRE = regexp.MustCompile(`[^a-z0-9.-]+`)

var sentinelRE = regexp.MustCompile(`__helm_(\d+)__`)

func (g *chartGen) sentinel(block func(indent string) string) string {
	g.blocks = append(g.blocks, block)
	return fmt.Sprintf("__helm_%d__", len(g.blocks)-1)
}

// guarded is a block of YAML lines (items or keys, as marshalled) that
// only a condition's render has.
func guarded(cond, yamlText string) func(string) string {
	return func(indent string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s{{- if %s }}\n", indent, cond)
		for _, l := range strings.Split(strings.TrimRight(yamlText, "\n"), "\n") {
			b.WriteString(indent + l + "\n")
		}
		fmt.Fprintf(&b, "%s{{- end }}", indent)
		return b.String()
	}
}

// variants merges the variant renders into base: an object only a variant
// has is guarded by its condition as a whole; one both have may only add
// list items after base's and map keys (the job-mode component's patches
// do), each addition guarded.
func (g *chartGen) variants(base, job, prom []*object) ([]*object, error) {
	byKey := map[string]*object{}
	for _, o := range base {
		byKey[o.key()] = o
	}
	out := append([]*object(nil), base...)
	for _, v := range []struct {
		cond    string
		objs    []*object
		changes bool // may change base's objects
	}{{condServiceMonitor, prom, false}, {condJobMode, job, true}} { // base's objects unchanged until the last
		for _, o := range v.objs {
			b, ok := byKey[o.key()]
			if !ok {
				o.cond = v.cond
				byKey[o.key()] = o
				out = append(out, o)
				continue
			}
			if reflect.DeepEqual(b.obj, o.obj) {
				continue
			}
			if !v.changes {
				return nil, fmt.Errorf("chart: the %s render changes %s, which the generator does not template", v.cond, o.key())
			}
			merged, err := g.merge(b.obj, o.obj, v.cond, o.key())
			if err != nil {
				return nil, err
			}
			b.obj = merged.(map[string]any)
		}
	}
	return out, nil
}

// merge returns base with what variant adds guarded by cond.
func (g *chartGen) merge(base, variant any, cond, path string) (any, error) {
	switch b := base.(type) {
	case map[string]any:
		v, ok := variant.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("chart: %s: a map in one render only", path)
		}
		out := map[string]any{}
		extra := map[string]any{}
		for k, bv := range b {
			vv, ok := v[k]
			if !ok {
				return nil, fmt.Errorf("chart: %s.%s: removed by %s", path, k, cond)
			}
			m, err := g.merge(bv, vv, cond, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = m
		}
		for k, vv := range v {
			if _, ok := b[k]; !ok {
				extra[k] = vv
			}
		}
		if len(extra) > 0 {
			text, err := yaml.Marshal(g.releaseNamespace(extra))
			if err != nil {
				return nil, err
			}
			// A key whose line is the block: sorted last by the marshaller.
			out["zzz"+g.sentinel(guarded(cond, string(text)))] = nil
		}
		return out, nil
	case []any:
		v, ok := variant.([]any)
		if !ok || len(v) < len(b) {
			return nil, fmt.Errorf("chart: %s: a list %s does not extend", path, cond)
		}
		out := make([]any, len(b))
		for i := range b {
			m, err := g.merge(b[i], v[i], cond, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = m
		}
		if len(v) > len(b) {
			text, err := yaml.Marshal(g.releaseNamespace(v[len(b):]))
			if err != nil {
				return nil, err
			}
			out = append(out, g.sentinel(guarded(cond, string(text))))
		}
		return out, nil
	default:
		if !reflect.DeepEqual(base, variant) {
			return nil, fmt.Errorf("chart: %s: %v becomes %v with %s; the generator only templates additions", path, base, variant, cond)
		}
		return base, nil
	}
}

// keepOnUninstall has helm uninstall leave an object: the CRD, whose
// deletion would delete every WindowsInstance (their hosts stay joined,
// unmanaged) and which a reinstall needs.
func keepOnUninstall(obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[HelmKeepAnnotation] = "keep"
}

// HelmKeepAnnotation is the chart's only addition to an object's
// metadata (on the CRD; see keepOnUninstall).
const HelmKeepAnnotation = "helm.sh/resource-policy"

func controllerContainer(dep map[string]any) (map[string]any, error) {
	cs, _, _ := nestedSlice(dep, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "controller" {
			return m, nil
		}
	}
	return nil, fmt.Errorf("chart: the Deployment has no container named controller")
}

func payloadImage(dep map[string]any) (imageRef, error) {
	cs, _, _ := nestedSlice(dep, "spec", "template", "spec", "initContainers")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "payload" {
			return parseImage(fmt.Sprint(m["image"]))
		}
	}
	return imageRef{}, fmt.Errorf("chart: the Deployment has no init container named payload")
}

func nestedSlice(m map[string]any, path ...string) ([]any, bool, error) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = mm[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

// parametriseController puts the values' resources and site flags into
// the controller's container.
func (g *chartGen) parametriseController(o *object) error {
	c, err := controllerContainer(o.obj)
	if err != nil {
		return err
	}
	c["resources"] = g.sentinel(func(indent string) string {
		return fmt.Sprintf("{{- toYaml .Values.resources | nindent %d }}", len(indent)+2)
	})
	args, ok := c["args"].([]any)
	if !ok {
		return fmt.Errorf("chart: the controller container has no args")
	}
	c["args"] = append(args, g.sentinel(func(indent string) string {
		var b strings.Builder
		for i, l := range strings.Split(strings.TrimRight(siteArgs, "\n"), "\n") {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(indent + l)
		}
		return b.String()
	}))
	return nil
}

// siteArgs are the controller flags a site sets (docs/controller.md), each
// only when its value is set, so the defaults add none.
const siteArgs = `{{- with .Values.controller.defaultApproval }}
- {{ printf "--default-approval=%s" . | quote }}
{{- end }}
{{- with .Values.controller.byohNamespace }}
- {{ printf "--byoh-namespace=%s" . | quote }}
{{- end }}
{{- if not (kindIs "invalid" .Values.controller.configMap) }}
- {{ printf "--configmap=%s" .Values.controller.configMap | quote }}
{{- end }}
{{- with .Values.controller.maxConcurrentRuns }}
- {{ printf "--max-concurrent-runs=%v" . | quote }}
{{- end }}
{{- with .Values.controller.maxUnavailable }}
- {{ printf "--max-unavailable=%v" . | quote }}
{{- end }}
{{- with .Values.controller.driftInterval }}
- {{ printf "--drift-interval=%s" . | quote }}
{{- end }}
{{- if .Values.controller.allowPlaybookConfigMaps }}
- --allow-playbook-configmaps
{{- end }}
{{- with .Values.controller.allowedJumpHosts }}
- {{ printf "--allowed-jump-hosts=%s" (join "," .) | quote }}
{{- end }}
{{- range $k, $v := .Values.controller.vars }}
- {{ printf "--var=%s=%v" $k $v | quote }}
{{- end }}
{{- range $k, $v := .Values.controller.hostVars }}
- {{ printf "--host-var=%s=%v" $k $v | quote }}
{{- end }}
{{- range .Values.controller.extraArgs }}
- {{ . | quote }}
{{- end }}`

// template marshals an object and replaces its sentinels: the chart's
// template file for it.
func (g *chartGen) template(o *object) (string, error) {
	obj := g.releaseNamespace(o.obj).(map[string]any)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var b strings.Builder
	cond := o.cond
	if o.kind == "Namespace" {
		cond = condNamespace
	}
	if cond != "" {
		fmt.Fprintf(&b, "{{- if %s }}\n", cond)
	}
	for _, l := range lines {
		b.WriteString(g.expand(l) + "\n")
	}
	if cond != "" {
		b.WriteString("{{- end }}\n")
	}
	return b.String(), nil
}

// expand replaces a line's sentinel: a list item or key that is the whole
// line becomes its block at the line's indentation; one in a value is
// replaced in place.
func (g *chartGen) expand(line string) string {
	m := sentinelRE.FindStringSubmatchIndex(line)
	if m == nil {
		return line
	}
	i, _ := strconv.Atoi(line[m[2]:m[3]])
	trimmed := strings.TrimLeft(line, " ")
	indent := line[:len(line)-len(trimmed)]
	token := line[m[0]:m[1]]
	switch trimmed {
	case "- " + token, "zzz" + token + ": null":
		return g.blocks[i](indent)
	}
	return line[:m[0]] + g.blocks[i](indent) + line[m[1]:]
}

// releaseNamespace replaces the overlay's namespace, wherever it is a
// value, by the release's.
func (g *chartGen) releaseNamespace(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = g.releaseNamespace(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = g.releaseNamespace(e)
		}
		return out
	case string:
		if x == KubernetesNamespace {
			return "{{ .Release.Namespace }}"
		}
	}
	return v
}

// replacer templates what the rendered text names literally, wherever it
// is (an image, an argument, the Job template's YAML): the images, their
// pull policy, and the controller's listen addresses.
func (g *chartGen) replacer(img, payload imageRef) *strings.Replacer {
	return strings.NewReplacer(
		img.String(), `{{ include "wsu.image" .Values.image }}`,
		payload.String(), `{{ include "wsu.image" .Values.payloadImage }}`,
		"--metrics-bind-address=:8443", "--metrics-bind-address={{ .Values.controller.metricsBindAddress }}",
		"--health-probe-bind-address=:8081", "--health-probe-bind-address={{ .Values.controller.healthProbeBindAddress }}",
	)
}

// pullPolicies templates each container's image and pull policy (the
// line after it, as the marshaller sorts keys and deploy/ writes them):
// the image's own pullPolicy value, or by default IfNotPresent for a
// digest or a version tag and Always for :latest (wsu.pullPolicy).
func pullPolicies(text string, img, payload imageRef) string {
	for _, im := range []struct {
		ref   imageRef
		value string
	}{{img, ".Values.image"}, {payload, ".Values.payloadImage"}} {
		re := regexp.MustCompile(`(image: )` + regexp.QuoteMeta(im.ref.String()) + `\n(\s*)imagePullPolicy: IfNotPresent\n`)
		text = re.ReplaceAllString(text, fmt.Sprintf("${1}{{ include \"wsu.image\" %s }}\n${2}imagePullPolicy: {{ include \"wsu.pullPolicy\" %s }}\n", im.value, im.value))
	}
	return text
}

// imageRef is an image reference split as the chart's values are.
type imageRef struct {
	registry, repository, tag, digest string
}

func (r imageRef) String() string {
	s := r.registry + "/" + r.repository
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// parseImage splits registry/repository[:tag][@digest]; the registry is
// required (deploy/ names its images fully).
func parseImage(s string) (imageRef, error) {
	var r imageRef
	if i := strings.Index(s, "@"); i >= 0 {
		s, r.digest = s[:i], s[i+1:]
	}
	slash := strings.Index(s, "/")
	if slash < 0 || !strings.ContainsAny(s[:slash], ".:") {
		return r, fmt.Errorf("chart: image %q names no registry", s)
	}
	r.registry, s = s[:slash], s[slash+1:]
	if i := strings.LastIndex(s, ":"); i >= 0 {
		s, r.tag = s[:i], s[i+1:]
	}
	r.repository = s
	return r, nil
}

func chartYAML() string {
	return fmt.Sprintf(`# GENERATED by make chart from deploy/%s (kustomize): do not edit.
apiVersion: v2
name: wsu
description: >-
  wsu's controller for vanilla Kubernetes: joins the Windows hosts of the
  BYOH ConfigMap (and WindowsInstances) to the cluster, keeps them joined,
  upgrades and removes them. The same objects as deploy/overlays/kubernetes.
type: application
version: %s
appVersion: %q
home: https://github.com/wsu-project/wsu
sources:
- https://github.com/wsu-project/wsu
keywords: [windows, nodes, byoh, kubeadm]
`, chartSource, version.Version, ImageTag())
}

func valuesYAML(img, payload imageRef, resources any) (string, error) {
	res, err := yaml.Marshal(resources)
	if err != nil {
		return "", err
	}
	var r bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(string(res), "\n"), "\n") {
		r.WriteString("  " + l + "\n")
	}
	return fmt.Sprintf(`# GENERATED by make chart from deploy/%s (kustomize): do not edit.
# The defaults render what kubectl apply -k deploy/%s applies, but the
# Namespace (see namespace.create). docs/install.md has the table.

# Create the release's Namespace, with the restricted Pod Security labels.
# helm install stores its release in the namespace before it creates
# anything, so it must exist first: create it yourself (kubectl create
# namespace, then the labels, docs/install.md) and keep this false, or use
# helm template | kubectl apply with true.
namespace:
  create: false

# The wsu image (make image): registry/repository:tag, or @digest when
# digest is set (preferred: it is immutable). pullPolicy "" is
# IfNotPresent for a digest or a version tag, Always for latest.
image:
  registry: %s
  repository: %s
  tag: %s
  digest: ""
  pullPolicy: ""

# The payload image (make payload-image PAYLOAD=DIR): the kubelet,
# containerd and the rest the hosts get. Build and push your own.
payloadImage:
  registry: %s
  repository: %s
  tag: %s
  digest: ""
  pullPolicy: ""

# Where playbooks run: in-process (in the controller's pod), or job (one
# Kubernetes Job per run, as ServiceAccount wsu-run; docs/controller.md,
# Run modes).
runMode: in-process

# The controller container's resources.
resources:
%s
# The controller's flags a site sets (docs/controller.md); an empty value
# leaves the flag out, and so the controller's default.
controller:
  # spec.approval of the instances made from the BYOH ConfigMap: Auto or
  # Manual (default Auto).
  defaultApproval: ""
  # Where the BYOH ConfigMap and the default key Secret are (default: the
  # release namespace).
  byohNamespace: ""
  # The BYOH ConfigMap to read; "" turns it off (null: windows-instances).
  configMap: null
  # Playbook runs at once (default 10).
  maxConcurrentRuns: null
  # Instances out of service at once for upgrades and removals: a number or
  # a percentage (default 1).
  maxUnavailable: null
  # How often a joined instance is planned again (default 10m).
  driftInterval: ""
  # Let instances run a site playbook from a ConfigMap (docs/install.md,
  # Security model).
  allowPlaybookConfigMaps: false
  # Jump hosts an instance's hostVars.proxy_jump may name.
  allowedJumpHosts: []
  # Playbook variables for every run (--var NAME=VALUE).
  vars: {}
  # Inventory variables for every host (--host-var NAME=VALUE).
  hostVars: {}
  # Any other flag, as written on the command line.
  extraArgs: []
  # The metrics (HTTPS; "0" turns them off) and probe listen addresses.
  metricsBindAddress: ":8443"
  healthProbeBindAddress: ":8081"

# A ServiceMonitor for the Prometheus Operator (its CRD must be installed)
# and the metrics reader binding of its Prometheus, as
# deploy/components/prometheus.
serviceMonitor:
  enabled: false
`, chartSource, chartSource, img.registry, img.repository, img.tag,
		payload.registry, payload.repository, payload.tag, r.String()), nil
}

const helpersTPL = `{{/* GENERATED by make chart: do not edit. */}}
{{/*
wsu.image is an image reference from an image value:
registry/repository:tag, or registry/repository@digest when digest is set.
*/}}
{{- define "wsu.image" -}}
{{- $repo := .repository -}}
{{- if .registry }}{{ $repo = printf "%s/%s" .registry .repository }}{{ end -}}
{{- if .digest }}{{ printf "%s@%s" $repo .digest }}{{ else }}{{ printf "%s:%s" $repo (required "an image needs a tag or a digest" .tag) }}{{ end -}}
{{- end -}}
{{/*
wsu.pullPolicy is an image value's pullPolicy, or else IfNotPresent for a
digest or a tag other than latest (a version is never moved), Always for
latest.
*/}}
{{- define "wsu.pullPolicy" -}}
{{- if .pullPolicy }}{{ .pullPolicy }}{{ else if or .digest (ne .tag "latest") }}IfNotPresent{{ else }}Always{{ end -}}
{{- end -}}
`

const notesTXT = `wsu's controller runs in {{ .Release.Namespace }} ({{ .Values.runMode }} runs).

Put the hosts' SSH key in the Secret cloud-private-key and list the hosts in
the ConfigMap windows-instances of {{ .Values.controller.byohNamespace | default .Release.Namespace }}:

  kubectl -n {{ .Release.Namespace }} get windowsinstances -w

docs/install.md and docs/controller.md have the rest.
`

// valuesSchema checks what the templates depend on.
const valuesSchema = `{
  "$schema": "https://json-schema.org/draft-07/schema#",
  "type": "object",
  "required": ["image", "payloadImage", "runMode", "controller", "namespace", "serviceMonitor"],
  "properties": {
    "namespace": {"type": "object", "properties": {"create": {"type": "boolean"}}},
    "image": {"$ref": "#/definitions/image"},
    "payloadImage": {"$ref": "#/definitions/image"},
    "runMode": {"enum": ["in-process", "job"]},
    "resources": {"type": "object"},
    "controller": {
      "type": "object",
      "properties": {
        "defaultApproval": {"enum": ["", "Auto", "Manual"]},
        "byohNamespace": {"type": "string"},
        "configMap": {"type": ["string", "null"]},
        "maxConcurrentRuns": {"type": ["integer", "null"], "minimum": 1},
        "maxUnavailable": {"type": ["integer", "string", "null"]},
        "driftInterval": {"type": "string"},
        "allowPlaybookConfigMaps": {"type": "boolean"},
        "allowedJumpHosts": {"type": "array", "items": {"type": "string"}},
        "vars": {"type": "object"},
        "hostVars": {"type": "object"},
        "extraArgs": {"type": "array", "items": {"type": "string"}},
        "metricsBindAddress": {"type": ["string", "integer"]},
        "healthProbeBindAddress": {"type": ["string", "integer"]}
      }
    },
    "serviceMonitor": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}
  },
  "definitions": {
    "image": {
      "type": "object",
      "required": ["repository"],
      "properties": {
        "registry": {"type": "string"},
        "repository": {"type": "string", "minLength": 1},
        "tag": {"type": "string"},
        "digest": {"type": "string", "pattern": "^(|sha256:[0-9a-f]{64})$"},
        "pullPolicy": {"enum": ["", "Always", "IfNotPresent", "Never"]}
      }
    }
  }
}
`
