//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// HNS through computenetwork.dll's HCN API, loaded on first use so the agent
// also starts where there is none (Wine, Windows without the Containers
// feature). The one legacy call, attaching an endpoint to the host, is
// vmcompute.dll's HNSCall, as hcsshim does it.
var (
	computenetwork            = windows.NewLazySystemDLL("computenetwork.dll")
	procHcnEnumerateNetworks  = computenetwork.NewProc("HcnEnumerateNetworks")
	procHcnOpenNetwork        = computenetwork.NewProc("HcnOpenNetwork")
	procHcnQueryNetworkProps  = computenetwork.NewProc("HcnQueryNetworkProperties")
	procHcnCloseNetwork       = computenetwork.NewProc("HcnCloseNetwork")
	procHcnDeleteNetwork      = computenetwork.NewProc("HcnDeleteNetwork")
	procHcnEnumerateEndpoints = computenetwork.NewProc("HcnEnumerateEndpoints")
	procHcnOpenEndpoint       = computenetwork.NewProc("HcnOpenEndpoint")
	procHcnQueryEndpointProps = computenetwork.NewProc("HcnQueryEndpointProperties")
	procHcnCloseEndpoint      = computenetwork.NewProc("HcnCloseEndpoint")
	procHcnCreateEndpoint     = computenetwork.NewProc("HcnCreateEndpoint")
	procHcnDeleteEndpoint     = computenetwork.NewProc("HcnDeleteEndpoint")
	vmcompute                 = windows.NewLazySystemDLL("vmcompute.dll")
	procHNSCall               = vmcompute.NewProc("HNSCall")
)

const hrElementNotFound = 0x80070490 // HRESULT_FROM_WIN32(ERROR_NOT_FOUND)

// hcnQuery asks for v2 properties of every object.
const hcnQuery = `{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0}`

// needHCN reports a missing DLL or export as not supported.
func needHCN(op string, procs ...*windows.LazyProc) error {
	for _, p := range procs {
		if err := p.Find(); err != nil {
			return host.NotSupported(op, fmt.Sprintf("%s: no Host Networking Service API: %v", platform, err))
		}
	}
	return nil
}

// hcnError is a failed HRESULT with the call's result record.
type hcnError struct {
	call   string
	hr     uintptr
	record string
}

func (e *hcnError) Error() string {
	if e.record != "" {
		return fmt.Sprintf("%s: HRESULT 0x%08x: %s", e.call, uint32(e.hr), e.record)
	}
	return fmt.Sprintf("%s: HRESULT 0x%08x: %v", e.call, uint32(e.hr), syscall.Errno(e.hr&0xffff))
}

func isNotFound(err error) bool {
	var he *hcnError
	return errors.As(err, &he) && he.hr == hrElementNotFound
}

// call invokes an HCN function whose last argument is the result record.
func call(name string, p *windows.LazyProc, args ...uintptr) error {
	var record *uint16
	r, _, _ := p.Call(append(args, uintptr(unsafe.Pointer(&record)))...)
	rec := takeString(record)
	if int32(r) < 0 {
		return &hcnError{call: name, hr: r, record: hcnResult(rec)}
	}
	return nil
}

// takeString copies and frees a string the HCN API allocated.
func takeString(p *uint16) string {
	if p == nil {
		return ""
	}
	s := windows.UTF16PtrToString(p)
	windows.CoTaskMemFree(unsafe.Pointer(p))
	return s
}

func parseGUID(id string) (windows.GUID, error) {
	s := strings.TrimSpace(id)
	if !strings.HasPrefix(s, "{") {
		s = "{" + s + "}"
	}
	return windows.GUIDFromString(s)
}

func enumerate(name string, p *windows.LazyProc) ([]string, error) {
	q, _ := windows.UTF16PtrFromString(hcnQuery)
	var list *uint16
	if err := call(name, p, uintptr(unsafe.Pointer(q)), uintptr(unsafe.Pointer(&list))); err != nil {
		takeString(list)
		return nil, err
	}
	return parseIDList(takeString(list))
}

// properties opens an object by ID, queries its properties and closes it.
func properties(id string, open, query, closeProc *windows.LazyProc, what string) (string, error) {
	g, err := parseGUID(id)
	if err != nil {
		return "", fmt.Errorf("HNS %s id %q: %w", what, id, err)
	}
	var h uintptr
	if err := call("HcnOpen"+what, open, uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(&h))); err != nil {
		return "", err
	}
	defer closeProc.Call(h)
	q, _ := windows.UTF16PtrFromString(hcnQuery)
	var props *uint16
	err = call("HcnQuery"+what+"Properties", query, h, uintptr(unsafe.Pointer(q)), uintptr(unsafe.Pointer(&props)))
	s := takeString(props)
	return s, err
}

func (h *winHost) HNSNetworks(ctx context.Context) ([]host.HNSNetwork, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := needHCN("HNS networks", procHcnEnumerateNetworks, procHcnOpenNetwork, procHcnQueryNetworkProps, procHcnCloseNetwork); err != nil {
		return nil, err
	}
	return listNetworks()
}

func listNetworks() ([]host.HNSNetwork, error) {
	ids, err := enumerate("HcnEnumerateNetworks", procHcnEnumerateNetworks)
	if err != nil {
		return nil, err
	}
	var out []host.HNSNetwork
	for _, id := range ids {
		props, err := properties(id, procHcnOpenNetwork, procHcnQueryNetworkProps, procHcnCloseNetwork, "Network")
		if isNotFound(err) {
			continue // deleted while we listed
		}
		if err != nil {
			return nil, err
		}
		n, err := parseNetwork(props)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func (h *winHost) HNSEndpoints(ctx context.Context) ([]host.HNSEndpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := needHCN("HNS endpoints", procHcnEnumerateNetworks, procHcnOpenNetwork, procHcnQueryNetworkProps, procHcnCloseNetwork,
		procHcnEnumerateEndpoints, procHcnOpenEndpoint, procHcnQueryEndpointProps, procHcnCloseEndpoint); err != nil {
		return nil, err
	}
	return listEndpoints()
}

func listEndpoints() ([]host.HNSEndpoint, error) {
	nets, err := listNetworks()
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, n := range nets {
		names[n.ID] = n.Name
	}
	ids, err := enumerate("HcnEnumerateEndpoints", procHcnEnumerateEndpoints)
	if err != nil {
		return nil, err
	}
	var out []host.HNSEndpoint
	for _, id := range ids {
		props, err := properties(id, procHcnOpenEndpoint, procHcnQueryEndpointProps, procHcnCloseEndpoint, "Endpoint")
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		e, err := parseEndpoint(props, names)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (h *winHost) HNSCreateEndpoint(ctx context.Context, spec host.HNSEndpoint) (host.HNSEndpoint, error) {
	if err := ctx.Err(); err != nil {
		return host.HNSEndpoint{}, err
	}
	procs := []*windows.LazyProc{procHcnEnumerateNetworks, procHcnOpenNetwork, procHcnQueryNetworkProps, procHcnCloseNetwork,
		procHcnCreateEndpoint, procHcnQueryEndpointProps, procHcnCloseEndpoint, procHcnDeleteEndpoint}
	if spec.HostAttach {
		procs = append(procs, procHNSCall)
	}
	if err := needHCN("HNS endpoint create", procs...); err != nil {
		return host.HNSEndpoint{}, err
	}
	if spec.Name == "" || spec.Network == "" {
		return host.HNSEndpoint{}, errors.New("HNS endpoint create: name and network are required")
	}
	nets, err := listNetworks()
	if err != nil {
		return host.HNSEndpoint{}, err
	}
	netID := ""
	for _, n := range nets {
		if n.Name == spec.Network {
			netID = n.ID
		}
	}
	if netID == "" {
		return host.HNSEndpoint{}, fmt.Errorf("HNS endpoint create: network %q not found", spec.Network)
	}
	settings, err := endpointSettings(spec, netID)
	if err != nil {
		return host.HNSEndpoint{}, err
	}
	props, err := createEndpoint(netID, settings)
	if err != nil {
		return host.HNSEndpoint{}, fmt.Errorf("HNS endpoint create %s: %w", spec.Name, err)
	}
	ep, err := parseEndpoint(props, map[string]string{netID: spec.Network})
	if err != nil {
		return host.HNSEndpoint{}, err
	}
	if spec.HostAttach {
		if err := hostAttach(ep.ID); err != nil {
			// Half an endpoint is worse than none: the next run recreates it.
			deleteByID(procHcnDeleteEndpoint, "HcnDeleteEndpoint", ep.ID)
			return host.HNSEndpoint{}, fmt.Errorf("HNS endpoint %s: attach to the host: %w", spec.Name, err)
		}
		ep.HostAttach = true
	}
	return ep, nil
}

func createEndpoint(netID, settings string) (string, error) {
	g, err := parseGUID(netID)
	if err != nil {
		return "", err
	}
	var network uintptr
	if err := call("HcnOpenNetwork", procHcnOpenNetwork, uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(&network))); err != nil {
		return "", err
	}
	defer procHcnCloseNetwork.Call(network)
	var id windows.GUID // zero: HNS picks the id
	s, _ := windows.UTF16PtrFromString(settings)
	var endpoint uintptr
	if err := call("HcnCreateEndpoint", procHcnCreateEndpoint, network, uintptr(unsafe.Pointer(&id)),
		uintptr(unsafe.Pointer(s)), uintptr(unsafe.Pointer(&endpoint))); err != nil {
		return "", err
	}
	defer procHcnCloseEndpoint.Call(endpoint)
	q, _ := windows.UTF16PtrFromString(hcnQuery)
	var props *uint16
	err = call("HcnQueryEndpointProperties", procHcnQueryEndpointProps, endpoint, uintptr(unsafe.Pointer(q)), uintptr(unsafe.Pointer(&props)))
	return takeString(props), err
}

// hostAttach puts an endpoint into the host's network compartment (1).
func hostAttach(id string) error {
	method, _ := windows.UTF16PtrFromString("POST")
	path, _ := windows.UTF16PtrFromString("/endpoints/" + id + "/attach")
	body, _ := windows.UTF16PtrFromString(`{"SystemType":"Host","CompartmentId":1}`)
	var resp *uint16
	r, _, _ := procHNSCall.Call(uintptr(unsafe.Pointer(method)), uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(body)), uintptr(unsafe.Pointer(&resp)))
	out := takeString(resp)
	if int32(r) < 0 {
		return &hcnError{call: "HNSCall attach", hr: r, record: hcnResult(out)}
	}
	if ok, msg := hnsResponse(out); !ok && !strings.Contains(msg, "already attached") {
		return fmt.Errorf("HNSCall attach: %s", msg)
	}
	return nil
}

func (h *winHost) HNSDeleteEndpoint(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := needHCN("HNS endpoint delete", procHcnDeleteEndpoint, procHcnEnumerateNetworks, procHcnOpenNetwork,
		procHcnQueryNetworkProps, procHcnCloseNetwork, procHcnEnumerateEndpoints, procHcnOpenEndpoint,
		procHcnQueryEndpointProps, procHcnCloseEndpoint); err != nil {
		return err
	}
	if _, err := parseGUID(id); err != nil {
		// A name: delete every endpoint of that name (there is usually one).
		eps, err := listEndpoints()
		if err != nil {
			return err
		}
		for _, e := range eps {
			if e.Name == id {
				if err := deleteByID(procHcnDeleteEndpoint, "HcnDeleteEndpoint", e.ID); err != nil {
					return fmt.Errorf("HNS endpoint delete %s: %w", id, err)
				}
			}
		}
		return nil
	}
	if err := deleteByID(procHcnDeleteEndpoint, "HcnDeleteEndpoint", id); err != nil {
		return fmt.Errorf("HNS endpoint delete %s: %w", id, err)
	}
	return nil
}

func (h *winHost) HNSDeleteNetwork(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := needHCN("HNS network delete", procHcnDeleteNetwork, procHcnEnumerateNetworks, procHcnOpenNetwork,
		procHcnQueryNetworkProps, procHcnCloseNetwork); err != nil {
		return err
	}
	if _, err := parseGUID(id); err != nil {
		nets, err := listNetworks()
		if err != nil {
			return err
		}
		for _, n := range nets {
			if n.Name == id {
				if err := deleteByID(procHcnDeleteNetwork, "HcnDeleteNetwork", n.ID); err != nil {
					return fmt.Errorf("HNS network delete %s: %w", id, err)
				}
			}
		}
		return nil
	}
	if err := deleteByID(procHcnDeleteNetwork, "HcnDeleteNetwork", id); err != nil {
		return fmt.Errorf("HNS network delete %s: %w", id, err)
	}
	return nil
}

// deleteByID deletes an HCN object; one that is gone already is no error.
func deleteByID(p *windows.LazyProc, name, id string) error {
	g, err := parseGUID(id)
	if err != nil {
		return err
	}
	err = call(name, p, uintptr(unsafe.Pointer(&g)))
	if isNotFound(err) {
		return nil
	}
	return err
}
