package windows

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// InstanceMetadata reads, from the node, the host name its cloud's
// instance metadata service gives it: the name the cloud controller looks
// the instance up by, which the kubelet must register (else the Node keeps
// its "uninitialized" taint). Only the node reaches the service (a
// link-local address), so the request goes through the Host API's DoHTTP.
// It never changes anything; Plan reads, so a plan shows the name.
type InstanceMetadata struct{}

var (
	_ modules.Module    = InstanceMetadata{}
	_ modules.Validator = InstanceMetadata{}
)

// metadataEndpoint is the metadata service of a platform wsu reads the
// node name from (OpenShift's Infrastructure platform names).
func metadataEndpoint(platform string) (string, bool) {
	switch platform {
	case "AWS":
		return "http://169.254.169.254", true
	case "GCP":
		return "http://metadata.google.internal", true
	}
	return "", false
}

// imdsTokenTTL is the IMDSv2 session token's lifetime: it is used once,
// at once.
const imdsTokenTTL = "60"

var metadataResults = []modules.Attribute{
	{Name: "hostname", Type: cty.String, Description: "The service's answer: AWS `local-hostname`, GCP `instance/hostname`."},
	{Name: "node_name", Type: cty.String, Description: "The name the kubelet registers: `hostname` lower-cased; on GCP, a name over 63 characters cut to its first label (WMCO's rule)."},
	{Name: "source", Type: cty.String, Description: "Where it came from: the URL, and on AWS `IMDSv2` or `IMDSv1`."},
	{Name: "summary", Type: cty.String, Description: "The node name and its source, in a sentence (what `wsu plan` shows)."},
}

func (InstanceMetadata) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_instance_metadata",
		Summary: "Read the node's host name from its cloud's instance metadata service (AWS, GCP), on the node.",
		Description: "The cloud controller of AWS and GCP finds a node's instance by the name the instance " +
			"metadata service gives it, so the kubelet must register that name (`--hostname-override`). Only the " +
			"node reaches the service, so the request is made by the node (the agent's `net.http`: straight to " +
			"the service, never through the node's proxy, redirects only to the same host, answers of at most 64 KiB; " +
			"plain `http` only: the agent links no TLS, and the metadata services are plain HTTP on link-local addresses).\n\n" +
			"- `AWS`: `GET /latest/meta-data/local-hostname` with an IMDSv2 session token (`PUT /latest/api/token` " +
			"with `X-aws-ec2-metadata-token-ttl-seconds`, the token sent as `X-aws-ec2-metadata-token`); a service " +
			"that answers the token request with an error status is asked without one (IMDSv1). The token is " +
			"never shown or kept.\n" +
			"- `GCP`: `GET /computeMetadata/v1/instance/hostname` with `Metadata-Flavor: Google`; a name over " +
			"63 characters is cut to its first label, as WMCO does.\n\n" +
			"The name is lower-cased and must be a valid Kubernetes node name. Plan reads the service, so the " +
			"plan shows the name; it never changes anything.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "platform", Type: cty.String, Required: true, Description: "`\"AWS\"` or `\"GCP\"` (OpenShift's Infrastructure platform names)."},
			{Name: "endpoint", Type: cty.String,
				Description: "Base `http` URL of the metadata service (`https` is refused); null: `http://169.254.169.254` (AWS), `http://metadata.google.internal` (GCP). Tests point it at a stand-in."},
			{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(5), Description: "Seconds each request may take."},
		},
		Results: metadataResults,
		Show:    "summary",
		Example: `task "instance_metadata" {
  win_instance_metadata {
    platform = "AWS"
  }
}`,
	}
}

func (InstanceMetadata) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if p, ok := str(get(cfg, "platform")); ok {
		if _, known := metadataEndpoint(p); !known {
			diags = append(diags, cfg.Error("platform", "Invalid platform",
				fmt.Sprintf("platform %q: want \"AWS\" or \"GCP\" (vSphere's node name is the host's FQDN, in its facts).", p)))
		}
	}
	if e, ok := str(get(cfg, "endpoint")); ok {
		if u, err := url.Parse(e); err != nil || u.Scheme != "http" || u.Hostname() == "" || u.User != nil {
			diags = append(diags, cfg.Error("endpoint", "Invalid endpoint", fmt.Sprintf("endpoint %q: want an http URL naming a host, such as http://169.254.169.254 (the agent speaks plain HTTP only, as the metadata services do).", e)))
		}
	}
	if t := get(cfg, "timeout"); t.IsKnown() && !t.IsNull() {
		if s := seconds(t); s <= 0 || s > host.MaxHTTPTimeout {
			diags = append(diags, cfg.Error("timeout", "Invalid timeout", fmt.Sprintf("timeout must be more than 0 and at most %d seconds.", int(host.MaxHTTPTimeout.Seconds()))))
		}
	}
	return diags
}

// metadataRead is one read of the service.
type metadataRead struct {
	platform, base string
	timeout        time.Duration
	h              host.Host
}

func (m InstanceMetadata) read(ctx context.Context, h host.Host, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	platform, _ := str(get(cfg, "platform"))
	base, ok := str(get(cfg, "endpoint"))
	if !ok {
		base, _ = metadataEndpoint(platform)
	}
	r := metadataRead{platform: platform, base: strings.TrimSuffix(base, "/"), timeout: seconds(get(cfg, "timeout")), h: h}
	var hostname, source string
	var err error
	if platform == "AWS" {
		hostname, source, err = r.aws(ctx)
	} else {
		hostname, source, err = r.gcp(ctx)
	}
	if err != nil {
		return unknownResult(metadataResults), hostError(cfg, "platform", "Cannot read the instance metadata",
			fmt.Errorf("%w (the node must reach its cloud's metadata service; set node_name instead where it cannot)", err))
	}
	name := nodeNameFrom(platform, hostname)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return unknownResult(metadataResults), hcl.Diagnostics{cfg.Error("platform", "Invalid node name from the instance metadata",
			fmt.Sprintf("%s answered %q, which is not a valid node name: %s.", source, hostname, strings.Join(errs, "; ")))}
	}
	return result(metadataResults, map[string]cty.Value{
		"hostname": cty.StringVal(hostname), "node_name": cty.StringVal(name), "source": cty.StringVal(source),
		"summary": cty.StringVal(fmt.Sprintf("node name %s (%s instance metadata, %s)", name, platform, source)),
	}), nil
}

// nodeNameFrom applies WMCO's rules: lower case; on GCP a name longer than
// a DNS label is cut to its first label (GCP's instance names fit one).
func nodeNameFrom(platform, hostname string) string {
	name := strings.ToLower(hostname)
	if platform == "GCP" && len(name) > validation.DNS1123LabelMaxLength {
		name, _, _ = strings.Cut(name, ".")
	}
	return name
}

// aws reads local-hostname with an IMDSv2 token, or without one from a
// service that refuses to issue tokens (IMDSv1).
func (r metadataRead) aws(ctx context.Context) (hostname, source string, err error) {
	tokenURL := r.base + "/latest/api/token"
	resp, err := r.h.DoHTTP(ctx, host.HTTPRequest{Method: "PUT", URL: tokenURL, Timeout: r.timeout,
		Header: map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": imdsTokenTTL}})
	if err != nil {
		return "", "", err
	}
	nameURL := r.base + "/latest/meta-data/local-hostname"
	get := host.HTTPRequest{URL: nameURL, Timeout: r.timeout}
	source = nameURL + ", IMDSv1"
	if ok2xx(resp.Status) {
		token := strings.TrimSpace(string(resp.Body))
		if token == "" {
			return "", "", fmt.Errorf("PUT %s: the service issued an empty token", tokenURL)
		}
		get.Header = map[string]string{"X-aws-ec2-metadata-token": token}
		source = nameURL + ", IMDSv2"
	}
	hostname, err = r.answer(ctx, get)
	return hostname, source, err
}

func (r metadataRead) gcp(ctx context.Context) (hostname, source string, err error) {
	u := r.base + "/computeMetadata/v1/instance/hostname"
	hostname, err = r.answer(ctx, host.HTTPRequest{URL: u, Timeout: r.timeout, Header: map[string]string{"Metadata-Flavor": "Google"}})
	return hostname, u, err
}

// answer GETs req and returns its trimmed, non-empty 2xx body.
func (r metadataRead) answer(ctx context.Context, req host.HTTPRequest) (string, error) {
	resp, err := r.h.DoHTTP(ctx, req)
	if err != nil {
		return "", err
	}
	if !ok2xx(resp.Status) {
		return "", fmt.Errorf("GET %s: status %d", req.URL, resp.Status)
	}
	v := strings.TrimSpace(string(resp.Body))
	if v == "" {
		return "", fmt.Errorf("GET %s: empty answer", req.URL)
	}
	return v, nil
}

func ok2xx(status int) bool { return status >= 200 && status < 300 }

// Plan reads the service. A configuration known only at apply (a platform
// an earlier task reads) is read then: a Run change says so.
func (m InstanceMetadata) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	if !req.Config.Value.IsWhollyKnown() {
		return modules.PlanResponse{Result: unknownResult(metadataResults),
			Change: &modules.Change{Action: modules.Run, Subject: "read the instance metadata " + knownAfterApply}}
	}
	res, diags := m.read(ctx, req.Host, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m InstanceMetadata) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	if d := requireKnown(req.Config, "platform", "endpoint", "timeout"); d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(metadataResults), Diagnostics: d}
	}
	res, diags := m.read(ctx, req.Host, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
