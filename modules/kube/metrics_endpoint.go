package kube

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// MetricsEndpoint publishes a node's windows_exporter to the cluster as
// WMCO does: a Service without selector (so Prometheus can discover it)
// and, per node, an EndpointSlice holding the node's address. One slice
// per node keeps concurrent joins from writing the same object; its owner
// is the Node, so the garbage collector takes it away with the Node.
type MetricsEndpoint struct{ Clusters }

var (
	_ modules.Module    = MetricsEndpoint{}
	_ modules.Validator = MetricsEndpoint{}
)

// ManagedBy marks the objects wsu created: the Service and the slices.
// The value is also EndpointSlice's managed-by label, which tells the
// endpoint controllers to leave the slices alone.
const ManagedBy = "wsu.dev"

const (
	managedByLabel   = "app.kubernetes.io/managed-by"
	metricsPortName  = "metrics"
	sliceManagedBy   = discoveryv1.LabelManagedBy
	sliceServiceName = discoveryv1.LabelServiceName
	// ServingCertAnnotation asks OpenShift's service-ca operator for a
	// serving certificate of the Service (names <service>.<namespace>.svc),
	// which it writes, and renews, into the named kubernetes.io/tls Secret.
	ServingCertAnnotation = "service.beta.openshift.io/serving-cert-secret-name"
)

var metricsEndpointResults = []modules.Attribute{
	{Name: "service", Type: cty.String, Description: "`namespace/name` of the Service."},
	{Name: "endpoint_slice", Type: cty.String, Description: "Name of the node's EndpointSlice."},
	{Name: "tls_cert", Type: cty.String, Description: "With `serving_cert_secret`: the PEM certificate (chain) the service CA signed (the Secret's `tls.crt`); otherwise null."},
	{Name: "tls_key", Type: cty.String, Sensitive: true, Description: "With `serving_cert_secret`: its PEM private key (`tls.key`); otherwise null. Never shown."},
}

func (MetricsEndpoint) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_metrics_endpoint",
		Summary: "Publish a node's windows_exporter as an endpoint of the windows-exporter Service.",
		Description: "Makes the Service `service` in `namespace` exist without a selector, headless (as WMCO's), with one port " +
			"named `metrics` (`port`, TCP), and an EndpointSlice `<service>-<node_name>` listing " +
			"`address` for the node, so Prometheus (a ServiceMonitor or `endpointslice` discovery) can " +
			"scrape every Windows node's exporter through one Service, as WMCO publishes it. Each node has " +
			"its own slice, owned by its Node (the garbage collector removes it with the Node); " +
			"`state = \"absent\"` deletes the node's slice and leaves the Service to the other nodes.\n\n" +
			"The objects carry `app.kubernetes.io/managed-by: " + ManagedBy + "`; a Service of that name " +
			"someone else created is an error, not taken over. No Endpoints object is written: that API " +
			"is deprecated (Kubernetes 1.33), and EndpointSlices are what current Prometheus and WMCO's " +
			"ServiceMonitor read.\n\n" +
			"With `serving_cert_secret` (OpenShift), the Service carries `" + ServingCertAnnotation + "` naming " +
			"that Secret, as WMCO's does, so the service-ca operator writes a serving certificate for " +
			"`<service>.<namespace>.svc` into it; apply waits for the Secret (up to `serving_cert_timeout` " +
			"seconds) and returns its certificate and key as `tls_cert` and `tls_key` for windows_exporter's " +
			"`--web.config.file`. The Secret is read by name only.",
		Target: modules.TargetController,
		Attributes: withConn(
			modules.Attribute{Name: "namespace", Type: cty.String, Required: true, Description: "Namespace of the Service and slices."},
			modules.Attribute{Name: "service", Type: cty.String, Default: cty.StringVal("windows-exporter"), Description: "Name of the Service."},
			modules.Attribute{Name: "node_name", Type: cty.String, Required: true, Description: "The Node whose exporter this is."},
			modules.Attribute{Name: "address", Type: cty.String, Description: "The node's IP address (IPv4 or IPv6). Required unless `state = \"absent\"`."},
			modules.Attribute{Name: "port", Type: cty.Number, Default: cty.NumberIntVal(9182), Description: "The exporter's port."},
			modules.Attribute{Name: "state", Type: cty.String, Default: cty.StringVal("present"), Description: "`\"present\"` or `\"absent\"` (delete the node's slice)."},
			modules.Attribute{Name: "serving_cert_secret", Type: cty.String, Description: "OpenShift: name of the Secret the service CA writes the Service's serving certificate into (the Service is annotated to ask for it); null: no certificate asked for."},
			modules.Attribute{Name: "serving_cert_timeout", Type: cty.Number, Default: cty.NumberIntVal(300), Description: "Seconds apply waits for the service CA to write `serving_cert_secret`."},
		),
		Results: metricsEndpointResults,
		Example: `task "metrics endpoint" {
  k8s_metrics_endpoint {
    namespace = "kube-system"
    node_name = "win-01"
    address   = host.facts.ipv4
  }
}`,
	}
}

func (MetricsEndpoint) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	state, _ := str(get(cfg, "state"))
	if v := get(cfg, "state"); v.IsKnown() && state != "present" && state != "absent" {
		diags = append(diags, cfg.Error("state", "Invalid state", `state must be "present" or "absent".`))
	}
	diags = append(diags, validateNodeName(cfg, "node_name")...)
	if ns, ok := str(get(cfg, "namespace")); ok {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			diags = append(diags, cfg.Error("namespace", "Invalid namespace", fmt.Sprintf("%q: %v.", ns, errs)))
		}
	}
	if svc, ok := str(get(cfg, "service")); ok {
		if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
			diags = append(diags, cfg.Error("service", "Invalid service", fmt.Sprintf("%q: %v.", svc, errs)))
		}
	}
	if a := get(cfg, "address"); a.IsKnown() {
		s, ok := str(a)
		if _, err := netip.ParseAddr(s); ok && err != nil {
			diags = append(diags, cfg.Error("address", "Invalid address", fmt.Sprintf("address must be an IP address: %v.", err)))
		} else if !ok && state == "present" {
			diags = append(diags, cfg.Error("address", "Missing address", "The node's address is needed to publish its endpoint."))
		}
	}
	if sec, ok := str(get(cfg, "serving_cert_secret")); ok {
		if errs := validation.IsDNS1123Subdomain(sec); len(errs) > 0 {
			diags = append(diags, cfg.Error("serving_cert_secret", "Invalid serving_cert_secret", fmt.Sprintf("%q: %v.", sec, errs)))
		}
	}
	diags = append(diags, validateSeconds(cfg, nil, []string{"serving_cert_timeout"})...)
	if p := get(cfg, "port"); p.IsKnown() && !p.IsNull() {
		if n, acc := p.AsBigFloat().Int64(); acc != 0 || n < 1 || n > 65535 {
			diags = append(diags, cfg.Error("port", "Invalid port", "port must be a whole number from 1 to 65535."))
		}
	}
	return diags
}

// metricsTarget is what the task asks for, read from its configuration.
type metricsTarget struct {
	ns, svc, node, addr, slice string
	port                       int32
	certSecret                 string // "" : none asked for
	certTimeout                time.Duration
	absent                     bool
	// unlisted says why the address cannot be an endpoint ("" when it
	// can): the Service is published without this node.
	unlisted string
}

// endpointAddressProblem is why the API server refuses addr as an endpoint
// address (its rule for Endpoints and EndpointSlices), "" when it accepts
// it. A Windows node's InternalIP never falls here; a host reached over
// loopback (the test bed's) does.
func endpointAddressProblem(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return "is unspecified"
	case a.IsLoopback():
		return "is in the loopback range (127.0.0.0/8, ::1/128)"
	case a.IsLinkLocalUnicast():
		return "is in the link-local range (169.254.0.0/16, fe80::/10)"
	case a.IsLinkLocalMulticast():
		return "is in the link-local multicast range (224.0.0.0/24, ff02::/10)"
	}
	return ""
}

// unlistedWarning says the node's address is left out of the Service.
func (t metricsTarget) unlistedWarning(cfg modules.Config) hcl.Diagnostics {
	if t.unlisted == "" || t.absent {
		return nil
	}
	return hcl.Diagnostics{cfg.Warning("address", "Node address not published",
		fmt.Sprintf("The node's address %s %s, which the API server refuses as an endpoint: the Service %s/%s is published without this node, so Prometheus cannot scrape it through the Service. Give the node a routable address (node_ip).", t.addr, t.unlisted, t.ns, t.svc))}
}

func readTarget(cfg modules.Config) metricsTarget {
	t := metricsTarget{}
	t.ns, _ = str(get(cfg, "namespace"))
	t.svc, _ = str(get(cfg, "service"))
	t.node, _ = str(get(cfg, "node_name"))
	t.addr, _ = str(get(cfg, "address"))
	state, _ := str(get(cfg, "state"))
	t.absent = state == "absent"
	p, _ := get(cfg, "port").AsBigFloat().Int64()
	t.port = int32(p) //nolint:gosec // Validate bounds it
	t.slice = t.svc + "-" + t.node
	t.certSecret, _ = str(get(cfg, "serving_cert_secret"))
	t.certTimeout = seconds(get(cfg, "serving_cert_timeout"))
	t.unlisted = endpointAddressProblem(t.addr)
	return t
}

// result is the task's result; cert is the serving certificate read
// (nil: none asked for; unknown while the service CA has not written it).
func (t metricsTarget) result(cert *servingCert) cty.Value {
	crt, key := cty.NullVal(cty.String), cty.NullVal(cty.String)
	switch {
	case t.certSecret != "" && cert == nil && !t.absent:
		crt, key = cty.UnknownVal(cty.String), cty.UnknownVal(cty.String)
	case cert != nil:
		crt, key = cty.StringVal(cert.crt), cty.StringVal(cert.key)
	}
	return result(metricsEndpointResults, map[string]cty.Value{
		"service": cty.StringVal(t.ns + "/" + t.svc), "endpoint_slice": cty.StringVal(t.slice),
		"tls_cert": crt, "tls_key": key,
	})
}

// wantService is the Service: headless, as WMCO's (Prometheus scrapes each
// endpoint, never a virtual IP). A Service created with a cluster IP before
// keeps it: the field is immutable, and nothing reads it.
func (t metricsTarget) wantService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: t.svc, Namespace: t.ns, Labels: map[string]string{managedByLabel: ManagedBy, "name": t.svc},
			Annotations: t.annotations()},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{
			Name: metricsPortName, Protocol: corev1.ProtocolTCP, Port: t.port, TargetPort: intstr.FromInt32(t.port),
		}}},
	}
}

func (t metricsTarget) wantSlice(node *corev1.Node) *discoveryv1.EndpointSlice {
	addrType := discoveryv1.AddressTypeIPv4
	if a, err := netip.ParseAddr(t.addr); err == nil && a.Is6() && !a.Is4In6() {
		addrType = discoveryv1.AddressTypeIPv6
	}
	ready, name, proto, port := true, metricsPortName, corev1.ProtocolTCP, t.port
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: t.slice, Namespace: t.ns, Labels: map[string]string{
			managedByLabel: ManagedBy, sliceManagedBy: ManagedBy, sliceServiceName: t.svc,
		}},
		AddressType: addrType,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{t.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &t.node,
			TargetRef:  &corev1.ObjectReference{Kind: "Node", Name: t.node},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	if node != nil {
		s.Endpoints[0].TargetRef.UID = node.UID
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	}
	return s
}

// annotations ask the service CA for the serving certificate, if wanted.
func (t metricsTarget) annotations() map[string]string {
	if t.certSecret == "" {
		return nil
	}
	return map[string]string{ServingCertAnnotation: t.certSecret}
}

// serviceDiffers: the fields the task sets differ from the live Service's.
func serviceDiffers(have, want *corev1.Service) bool {
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			return true
		}
	}
	if len(have.Spec.Selector) > 0 || len(have.Spec.Ports) != 1 {
		return true
	}
	h, w := have.Spec.Ports[0], want.Spec.Ports[0]
	return h.Name != w.Name || h.Port != w.Port || h.Protocol != w.Protocol || h.TargetPort != w.TargetPort
}

func sliceDiffers(have, want *discoveryv1.EndpointSlice) bool {
	if have.AddressType != want.AddressType || len(have.Endpoints) != 1 || len(have.Ports) != 1 ||
		have.Labels[sliceServiceName] != want.Labels[sliceServiceName] || have.Labels[sliceManagedBy] != ManagedBy {
		return true
	}
	he, we := have.Endpoints[0], want.Endpoints[0]
	hp, wp := have.Ports[0], want.Ports[0]
	owned := len(want.OwnerReferences) == 0 || slices.ContainsFunc(have.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == want.OwnerReferences[0].UID })
	return !slices.Equal(he.Addresses, we.Addresses) || he.NodeName == nil || *he.NodeName != *we.NodeName ||
		hp.Port == nil || *hp.Port != *wp.Port || hp.Name == nil || *hp.Name != *wp.Name || !owned
}

// observed is the live state the plan compared.
type observed struct {
	svc   *corev1.Service // nil: missing
	slice *discoveryv1.EndpointSlice
	node  *corev1.Node
	cert  *servingCert // nil: not asked for, or not written yet
}

// servingCert is the certificate and key the service CA wrote.
type servingCert struct{ crt, key string }

// readServingCert reads the Secret the service CA writes, by name: nil
// while it is missing or not filled in yet.
func (t metricsTarget) readServingCert(ctx context.Context, cl *kube.Client) (*servingCert, error) {
	sec, err := cl.Kube.CoreV1().Secrets(t.ns).Get(ctx, t.certSecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil, nil
	}
	return &servingCert{crt: string(crt), key: string(key)}, nil
}

// awaitServingCert waits for the service CA to write the Secret, which it
// does once it sees the Service's annotation.
func (t metricsTarget) awaitServingCert(ctx context.Context, cl *kube.Client) (*servingCert, error) {
	var cert *servingCert
	res, err := waitFor(ctx, t.certTimeout, 2*time.Second, nil, func(ctx context.Context) (bool, string, error) {
		c, err := t.readServingCert(ctx, cl)
		cert = c
		if c == nil && err == nil {
			return false, "Secret " + t.ns + "/" + t.certSecret + " missing or without tls.crt and tls.key", nil
		}
		return c != nil, "", err
	})
	switch {
	case err != nil:
		return nil, err
	case res.timedOut:
		return nil, fmt.Errorf("the service CA wrote no serving certificate within %s (last observed: %s): is the service-ca operator running, and does the Service carry %s?", t.certTimeout, res.last, ServingCertAnnotation)
	}
	return cert, nil
}

func (m MetricsEndpoint) observe(ctx context.Context, cfg modules.Config, cl *kube.Client, t metricsTarget) (observed, hcl.Diagnostics) {
	var o observed
	diags := modutil.Together(
		func() hcl.Diagnostics {
			svc, err := getOrNil(cl.Kube.CoreV1().Services(t.ns).Get(ctx, t.svc, metav1.GetOptions{}))
			switch {
			case err != nil:
				return apiError(cfg, "namespace", "Cannot read the Service", err)
			case svc != nil && svc.Labels[managedByLabel] != ManagedBy && !t.absent:
				return hcl.Diagnostics{cfg.Error("service", "Service not managed by wsu",
					fmt.Sprintf("Service %s/%s exists without the label %s=%s, so someone else created it (WMCO's own, perhaps); wsu does not take it over. Delete it, or publish under another service name.", t.ns, t.svc, managedByLabel, ManagedBy))}
			}
			o.svc = svc
			return nil
		},
		func() hcl.Diagnostics {
			var err error
			if o.slice, err = getOrNil(cl.Kube.DiscoveryV1().EndpointSlices(t.ns).Get(ctx, t.slice, metav1.GetOptions{})); err != nil {
				return apiError(cfg, "namespace", "Cannot read the EndpointSlice", err)
			}
			return nil
		},
		func() hcl.Diagnostics {
			if t.absent || t.certSecret == "" {
				return nil
			}
			var err error
			if o.cert, err = t.readServingCert(ctx, cl); err != nil {
				return apiError(cfg, "serving_cert_secret", "Cannot read the serving certificate's Secret", err)
			}
			return nil
		},
		func() hcl.Diagnostics {
			if t.absent {
				return nil
			}
			var err error
			if o.node, err = getOrNil(cl.Kube.CoreV1().Nodes().Get(ctx, t.node, metav1.GetOptions{})); err != nil {
				return apiError(cfg, "node_name", "Cannot read the Node", err)
			}
			return nil
		},
	)
	return o, diags
}

// diff is the change, shared by Plan and Apply.
func (t metricsTarget) diff(o observed) *modules.Change {
	if t.absent {
		return t.sliceDeletion(o)
	}
	var fields []modules.FieldChange
	if o.svc == nil || serviceDiffers(o.svc, t.wantService()) {
		old := cty.NullVal(cty.String)
		if o.svc != nil {
			old = cty.StringVal("(other ports, a selector or no serving-cert annotation)")
		}
		want := fmt.Sprintf("%s/%s port %s %d/TCP", t.ns, t.svc, metricsPortName, t.port)
		if t.certSecret != "" {
			want += ", serving certificate in Secret " + t.certSecret
		}
		fields = append(fields, modules.FieldChange{Name: "service", Old: old, New: cty.StringVal(want)})
	}
	switch {
	case t.unlisted != "":
		if del := t.sliceDeletion(o); del != nil {
			fields = append(fields, del.Fields...)
		}
	case o.slice == nil || sliceDiffers(o.slice, t.wantSlice(o.node)):
		old := cty.NullVal(cty.List(cty.String))
		if o.slice != nil && len(o.slice.Endpoints) > 0 {
			old = strList(o.slice.Endpoints[0].Addresses)
		}
		fields = append(fields, modules.FieldChange{Name: "addresses", Old: old, New: strList([]string{t.addr})})
	}
	if len(fields) == 0 {
		return nil
	}
	action := modules.Update
	if o.slice == nil && t.unlisted == "" {
		action = modules.Create
	}
	return &modules.Change{Action: action, Subject: t.ns + "/" + t.slice, Fields: fields}
}

// sliceDeletion is the removal of the node's slice, if wsu's is there.
func (t metricsTarget) sliceDeletion(o observed) *modules.Change {
	if o.slice == nil || o.slice.Labels[sliceManagedBy] != ManagedBy {
		return nil
	}
	var addrs []string
	for _, e := range o.slice.Endpoints {
		addrs = append(addrs, e.Addresses...)
	}
	return &modules.Change{Action: modules.Delete, Subject: t.ns + "/" + t.slice, Fields: []modules.FieldChange{
		{Name: "addresses", Old: strList(addrs), New: cty.NullVal(cty.List(cty.String))},
	}}
}

func (m MetricsEndpoint) prepare(ctx context.Context, cfg modules.Config) (*kube.Client, metricsTarget, observed, bool, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known || !cfg.Value.IsWhollyKnown() {
		return nil, metricsTarget{}, observed{}, false, diags
	}
	t := readTarget(cfg)
	if errs := validation.IsDNS1123Subdomain(t.slice); len(errs) > 0 {
		return nil, t, observed{}, false, hcl.Diagnostics{cfg.Error("node_name", "Node name too long for an EndpointSlice", fmt.Sprintf("The slice would be named %q: %v.", t.slice, errs))}
	}
	o, diags := m.observe(ctx, cfg, cl, t)
	return cl, t, o, true, diags
}

func (m MetricsEndpoint) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	_, t, o, known, diags := m.prepare(ctx, req.Config)
	if !known || diags.HasErrors() {
		if !known && !diags.HasErrors() {
			return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: knownAfterApply}, Result: unknownResult(metricsEndpointResults)}
		}
		return modules.PlanResponse{Result: unknownResult(metricsEndpointResults), Diagnostics: diags}
	}
	return modules.PlanResponse{Change: t.diff(o), Result: t.result(o.cert), Diagnostics: append(diags, t.unlistedWarning(req.Config)...)}
}

func (m MetricsEndpoint) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	cl, t, o, known, diags := m.prepare(ctx, cfg)
	if diags.HasErrors() || !known {
		return modules.ApplyResponse{Result: unknownResult(metricsEndpointResults), Diagnostics: append(diags, requireKnown(cfg, "namespace", "node_name", "address")...)}
	}
	// The warning about an unlisted address is Plan's, which every apply runs first.
	if t.diff(o) != nil {
		if err := t.write(ctx, cl, o); err != nil {
			return modules.ApplyResponse{Result: unknownResult(metricsEndpointResults), Diagnostics: append(diags, apiError(cfg, "namespace", "Cannot publish the metrics endpoint", err)...)}
		}
	}
	if t.certSecret == "" || t.absent || o.cert != nil {
		return modules.ApplyResponse{Result: t.result(o.cert), Diagnostics: diags}
	}
	cert, err := t.awaitServingCert(ctx, cl)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(metricsEndpointResults), Diagnostics: append(diags, apiError(cfg, "serving_cert_secret", "No serving certificate for windows_exporter", err)...)}
	}
	return modules.ApplyResponse{Result: t.result(cert), Diagnostics: diags}
}

// write makes the cluster what diff said: the Service first (Prometheus
// finds slices through it), then the node's slice.
func (t metricsTarget) write(ctx context.Context, cl *kube.Client, o observed) error {
	if t.absent {
		return t.deleteSlice(ctx, cl, o)
	}
	if o.node == nil && t.unlisted == "" {
		return fmt.Errorf("node %s does not exist: its endpoint is published once it has registered", t.node)
	}
	svcs := cl.Kube.CoreV1().Services(t.ns)
	want := t.wantService()
	switch {
	case o.svc == nil:
		if _, err := svcs.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	case serviceDiffers(o.svc, want):
		upd := o.svc.DeepCopy()
		upd.Spec.Selector, upd.Spec.Ports = nil, want.Spec.Ports
		for k, v := range want.Annotations {
			metav1.SetMetaDataAnnotation(&upd.ObjectMeta, k, v)
		}
		if _, err := svcs.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if t.unlisted != "" {
		return t.deleteSlice(ctx, cl, o)
	}
	slices := cl.Kube.DiscoveryV1().EndpointSlices(t.ns)
	ws := t.wantSlice(o.node)
	if o.slice == nil {
		_, err := slices.Create(ctx, ws, metav1.CreateOptions{})
		return err
	}
	ws.ResourceVersion = o.slice.ResourceVersion
	_, err := slices.Update(ctx, ws, metav1.UpdateOptions{})
	return err
}

// deleteSlice removes wsu's slice for the node, if there is one.
func (t metricsTarget) deleteSlice(ctx context.Context, cl *kube.Client, o observed) error {
	if o.slice == nil || o.slice.Labels[sliceManagedBy] != ManagedBy {
		return nil
	}
	err := cl.Kube.DiscoveryV1().EndpointSlices(t.ns).Delete(ctx, t.slice, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.slice.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
