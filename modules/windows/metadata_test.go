package windows

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/test/standin/metadata"
)

// TestInstanceMetadata reads the node name from the stand-in metadata
// service (test/standin/metadata) through the simulated host's network.
func TestInstanceMetadata(t *testing.T) {
	long := "windows-worker-a.c.a-project-with-a-rather-long-name-4711.internal"
	tests := []struct {
		name         string
		platform     string
		opts         metadata.Options
		wantName     string
		wantSource   string
		wantRequests []string
		wantSummary  string // an error
		wantDetail   string
	}{
		{name: "AWS IMDSv2", platform: "AWS", opts: metadata.Options{AWSHostname: "ip-10-0-1-17.ec2.internal", TokenRequired: true},
			wantName: "ip-10-0-1-17.ec2.internal", wantSource: "/latest/meta-data/local-hostname, IMDSv2",
			wantRequests: []string{"PUT /latest/api/token", "GET /latest/meta-data/local-hostname token"}},
		{name: "AWS IMDSv1 only", platform: "AWS", opts: metadata.Options{AWSHostname: "IP-10-0-1-17.EC2.internal", IMDSv1Only: true},
			wantName: "ip-10-0-1-17.ec2.internal", wantSource: "/latest/meta-data/local-hostname, IMDSv1",
			wantRequests: []string{"PUT /latest/api/token", "GET /latest/meta-data/local-hostname"}},
		{name: "AWS without a name", platform: "AWS", opts: metadata.Options{GCPHostname: "x"}, wantSummary: "Cannot read the instance metadata", wantDetail: "status 404"},
		{name: "AWS name that is no node name", platform: "AWS", opts: metadata.Options{AWSHostname: "ip_10_0_1_17"}, wantSummary: "Invalid node name from the instance metadata", wantDetail: `answered "ip_10_0_1_17"`},
		{name: "GCP short name kept whole", platform: "GCP", opts: metadata.Options{GCPHostname: "win-a.c.proj.internal"},
			wantName: "win-a.c.proj.internal", wantSource: "/computeMetadata/v1/instance/hostname",
			wantRequests: []string{"GET /computeMetadata/v1/instance/hostname"}},
		{name: "GCP long name cut to its first label", platform: "GCP", opts: metadata.Options{GCPHostname: long},
			wantName: "windows-worker-a", wantSource: "/computeMetadata/v1/instance/hostname"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := metadata.Start(tt.opts)
			defer md.Close()
			h := newHost(t)
			cfg := cfgFor(t, InstanceMetadata{}, map[string]cty.Value{"platform": cty.StringVal(tt.platform), "endpoint": cty.StringVal(md.URL + "/")})
			pr := plan(t, InstanceMetadata{}, h, cfg)
			assert.Nil(t, pr.Change, "reading changes nothing")
			if tt.wantSummary != "" {
				requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, tt.wantSummary, "platform")
				assert.Contains(t, pr.Diagnostics.Error(), tt.wantDetail)
				assert.NotContains(t, pr.Diagnostics.Error(), "stand-in-token", "the token is never shown")
				return
			}
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			assert.Equal(t, tt.wantName, pr.Result.GetAttr("node_name").AsString())
			assert.Equal(t, md.URL+tt.wantSource, pr.Result.GetAttr("source").AsString())
			assert.Contains(t, pr.Result.GetAttr("summary").AsString(), "node name "+tt.wantName)
			if tt.wantRequests != nil {
				assert.Equal(t, tt.wantRequests, md.Requests())
			}
			for _, v := range pr.Result.AsValueMap() {
				assert.NotContains(t, v.AsString(), "stand-in-token", "the token is never kept")
			}
			ar := apply(t, InstanceMetadata{}, h, cfg, nil)
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.True(t, ar.Result.RawEquals(pr.Result), "apply reads the same name")
		})
	}
}

// A node that cannot reach the service fails the task, saying what to do.
func TestInstanceMetadataUnreachable(t *testing.T) {
	md := metadata.Start(metadata.Options{})
	base := md.URL
	md.Close()
	cfg := cfgFor(t, InstanceMetadata{}, map[string]cty.Value{"platform": cty.StringVal("GCP"), "endpoint": cty.StringVal(base), "timeout": cty.NumberIntVal(2)})
	pr := plan(t, InstanceMetadata{}, newHost(t), cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Cannot read the instance metadata", "platform")
	assert.Contains(t, pr.Diagnostics.Error(), "cannot connect")
	assert.Contains(t, pr.Diagnostics.Error(), "set node_name")
}

func TestInstanceMetadataValidate(t *testing.T) {
	row := func(name string, attrs map[string]cty.Value, summary, attr string) validateCase {
		if _, ok := attrs["platform"]; !ok {
			attrs["platform"] = cty.StringVal("AWS")
		}
		return validateCase{name: name, attrs: attrs, wantSummary: summary, wantAttr: attr}
	}
	runValidate(t, InstanceMetadata{}, []validateCase{
		row("valid", map[string]cty.Value{"endpoint": cty.StringVal("http://127.0.0.1:8080")}, "", ""),
		row("vSphere has no metadata name", map[string]cty.Value{"platform": cty.StringVal("VSphere")}, "Invalid platform", "platform"),
		row("lower-case platform", map[string]cty.Value{"platform": cty.StringVal("aws")}, "Invalid platform", "platform"),
		row("endpoint not a URL", map[string]cty.Value{"endpoint": cty.StringVal("169.254.169.254")}, "Invalid endpoint", "endpoint"),
		row("https endpoint", map[string]cty.Value{"endpoint": cty.StringVal("https://169.254.169.254")}, "Invalid endpoint", "endpoint"),
		row("endpoint with credentials", map[string]cty.Value{"endpoint": cty.StringVal("http://u:p@h")}, "Invalid endpoint", "endpoint"),
		row("zero timeout", map[string]cty.Value{"timeout": cty.NumberIntVal(0)}, "Invalid timeout", "timeout"),
	})
}
