package windows

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wsu-project/wsu/host"
)

// The HCN API speaks JSON. These are the fields wsu reads, in the v2 schema
// (HcnQuery*Properties) with the v1 (legacy HNS) names as fallbacks, since
// both appear in the wild.

type hcnNetwork struct {
	ID    string `json:"ID"`
	Name  string `json:"Name"`
	Type  string `json:"Type"`
	Ipams []struct {
		Subnets []struct {
			IpAddressPrefix string `json:"IpAddressPrefix"`
		} `json:"Subnets"`
	} `json:"Ipams"`
	Policies []struct {
		Type     string          `json:"Type"`
		Settings json.RawMessage `json:"Settings"`
	} `json:"Policies"`
	// v1
	ManagementIP string `json:"ManagementIP"`
	Subnets      []struct {
		AddressPrefix string `json:"AddressPrefix"`
	} `json:"Subnets"`
}

func parseNetwork(props string) (host.HNSNetwork, error) {
	var n hcnNetwork
	if err := json.Unmarshal([]byte(props), &n); err != nil {
		return host.HNSNetwork{}, fmt.Errorf("HNS network properties: %w", err)
	}
	out := host.HNSNetwork{ID: strings.ToLower(strings.Trim(n.ID, "{}")), Name: n.Name, Type: n.Type, ManagementIP: n.ManagementIP}
	for _, ipam := range n.Ipams {
		for _, s := range ipam.Subnets {
			out.Subnets = append(out.Subnets, s.IpAddressPrefix)
		}
	}
	for _, s := range n.Subnets {
		out.Subnets = append(out.Subnets, s.AddressPrefix)
	}
	// v2 has no ManagementIP; the overlay's provider address is the host
	// address it runs on.
	for _, p := range n.Policies {
		if out.ManagementIP == "" && p.Type == "ProviderAddress" {
			var pa struct{ ProviderAddress string }
			if json.Unmarshal(p.Settings, &pa) == nil {
				out.ManagementIP = pa.ProviderAddress
			}
		}
	}
	return out, nil
}

type hcnEndpoint struct {
	ID                 string `json:"ID"`
	Name               string `json:"Name"`
	HostComputeNetwork string `json:"HostComputeNetwork"`
	IpConfigurations   []struct {
		IpAddress string `json:"IpAddress"`
	} `json:"IpConfigurations"`
	MacAddress string `json:"MacAddress"`
	// v1
	VirtualNetwork     string `json:"VirtualNetwork"`
	VirtualNetworkName string `json:"VirtualNetworkName"`
	IPAddress          string `json:"IPAddress"`
}

// parseEndpoint reads endpoint properties; netNames maps lower-case network
// IDs to names, since v2 names the network only by ID.
func parseEndpoint(props string, netNames map[string]string) (host.HNSEndpoint, error) {
	var e hcnEndpoint
	if err := json.Unmarshal([]byte(props), &e); err != nil {
		return host.HNSEndpoint{}, fmt.Errorf("HNS endpoint properties: %w", err)
	}
	out := host.HNSEndpoint{ID: strings.ToLower(strings.Trim(e.ID, "{}")), Name: e.Name, MAC: e.MacAddress, IP: e.IPAddress}
	if len(e.IpConfigurations) > 0 {
		out.IP = e.IpConfigurations[0].IpAddress
	}
	netID := e.HostComputeNetwork
	if netID == "" {
		netID = e.VirtualNetwork
	}
	out.Network = netNames[strings.ToLower(strings.Trim(netID, "{}"))]
	if out.Network == "" {
		out.Network = e.VirtualNetworkName
	}
	return out, nil
}

// endpointSettings is the v2 JSON HcnCreateEndpoint takes.
func endpointSettings(spec host.HNSEndpoint, networkID string) (string, error) {
	type ipConfig struct {
		IpAddress string `json:"IpAddress"`
	}
	s := struct {
		Name               string                     `json:"Name"`
		HostComputeNetwork string                     `json:"HostComputeNetwork"`
		IpConfigurations   []ipConfig                 `json:"IpConfigurations,omitempty"`
		MacAddress         string                     `json:"MacAddress,omitempty"`
		SchemaVersion      struct{ Major, Minor int } `json:"SchemaVersion"`
	}{Name: spec.Name, HostComputeNetwork: networkID, MacAddress: spec.MAC}
	s.SchemaVersion.Major = 2
	if spec.IP != "" {
		s.IpConfigurations = []ipConfig{{IpAddress: spec.IP}}
	}
	b, err := json.Marshal(s)
	return string(b), err
}

// parseIDList reads the JSON array of GUIDs the enumerate calls return.
func parseIDList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal([]byte(s), &ids); err != nil {
		return nil, fmt.Errorf("HNS id list: %w", err)
	}
	return ids, nil
}

// hcnResult turns an HCN result record (JSON, possibly empty) into text.
func hcnResult(record string) string {
	var r struct {
		Error   string
		Success *bool
	}
	if json.Unmarshal([]byte(record), &r) == nil && r.Error != "" {
		return r.Error
	}
	return record
}

// hnsResponse reads the legacy HNSCall answer: {"Success":bool,"Error":"..."}.
func hnsResponse(out string) (bool, string) {
	var r struct {
		Success bool
		Error   string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return false, fmt.Sprintf("unreadable answer %q", out)
	}
	return r.Success, r.Error
}
