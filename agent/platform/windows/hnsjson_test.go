package windows

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestParseNetwork(t *testing.T) {
	v2 := `{"ID":"{4D9A1F2E-0000-4000-8000-000000000001}","Name":"OVNKubernetesHybridOverlayNetwork","Type":"Overlay",
		"Ipams":[{"Type":"Static","Subnets":[{"IpAddressPrefix":"10.132.0.0/24"}]}],
		"Policies":[{"Type":"ProviderAddress","Settings":{"ProviderAddress":"10.0.0.5"}}],"SchemaVersion":{"Major":2,"Minor":0}}`
	n, err := parseNetwork(v2)
	require.NoError(t, err)
	assert.Equal(t, host.HNSNetwork{ID: "4d9a1f2e-0000-4000-8000-000000000001", Name: "OVNKubernetesHybridOverlayNetwork",
		Type: "Overlay", ManagementIP: "10.0.0.5", Subnets: []string{"10.132.0.0/24"}}, n)

	v1 := `{"ID":"abc","Name":"nat","Type":"nat","ManagementIP":"172.20.0.1","Subnets":[{"AddressPrefix":"172.20.0.0/16"}]}`
	n, err = parseNetwork(v1)
	require.NoError(t, err)
	assert.Equal(t, "172.20.0.1", n.ManagementIP)
	assert.Equal(t, []string{"172.20.0.0/16"}, n.Subnets)

	_, err = parseNetwork(`{`)
	assert.Error(t, err)
}

func TestParseEndpoint(t *testing.T) {
	names := map[string]string{"4d9a1f2e-0000-4000-8000-000000000001": "OVNKubernetesHybridOverlayNetwork"}
	e, err := parseEndpoint(`{"ID":"E1","Name":"VIPEndpoint","HostComputeNetwork":"4D9A1F2E-0000-4000-8000-000000000001",
		"IpConfigurations":[{"IpAddress":"10.132.0.2","PrefixLength":24}],"MacAddress":"00-15-5D-00-00-01"}`, names)
	require.NoError(t, err)
	assert.Equal(t, host.HNSEndpoint{ID: "e1", Name: "VIPEndpoint", Network: "OVNKubernetesHybridOverlayNetwork",
		IP: "10.132.0.2", MAC: "00-15-5D-00-00-01"}, e)

	e, err = parseEndpoint(`{"ID":"e2","Name":"x","VirtualNetworkName":"nat","IPAddress":"172.20.0.9"}`, names)
	require.NoError(t, err)
	assert.Equal(t, "nat", e.Network)
	assert.Equal(t, "172.20.0.9", e.IP)
}

func TestEndpointSettings(t *testing.T) {
	s, err := endpointSettings(host.HNSEndpoint{Name: "VIPEndpoint", Network: "n", IP: "10.0.0.9"}, "net-id")
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &got))
	assert.Equal(t, "VIPEndpoint", got["Name"])
	assert.Equal(t, "net-id", got["HostComputeNetwork"])
	assert.Equal(t, []any{map[string]any{"IpAddress": "10.0.0.9"}}, got["IpConfigurations"])
	assert.Equal(t, map[string]any{"Major": 2.0, "Minor": 0.0}, got["SchemaVersion"])
	_, hasMAC := got["MacAddress"]
	assert.False(t, hasMAC)

	ids, err := parseIDList(`["a","b"]`)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids)
	ids, err = parseIDList("")
	require.NoError(t, err)
	assert.Empty(t, ids)

	ok, msg := hnsResponse(`{"Success":false,"Error":"This endpoint is already attached to the switch."}`)
	assert.False(t, ok)
	assert.Contains(t, msg, "already attached")
	ok, _ = hnsResponse(`{"Success":true}`)
	assert.True(t, ok)
	assert.Equal(t, "boom", hcnResult(`{"Error":"boom"}`))
	assert.Equal(t, "plain", hcnResult("plain"))
}
