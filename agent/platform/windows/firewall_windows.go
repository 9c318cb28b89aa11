//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

var _ host.Firewall = (*winHost)(nil)

var (
	ole32                = windows.NewLazySystemDLL("ole32.dll")
	procCoCreateInstance = ole32.NewProc("CoCreateInstance")
	oleaut32             = windows.NewLazySystemDLL("oleaut32.dll")
	procSysAllocString   = oleaut32.NewProc("SysAllocString")
	procSysFreeString    = oleaut32.NewProc("SysFreeString")

	// CLSIDs and IIDs from netfw.idl (read only).
	clsidNetFwPolicy2 = windows.GUID{Data1: 0xE2B3C97F, Data2: 0x6AE1, Data3: 0x41AC, Data4: [8]byte{0x81, 0x7A, 0xF6, 0xF9, 0x21, 0x66, 0xD7, 0xDD}}
	iidINetFwPolicy2  = windows.GUID{Data1: 0x98325047, Data2: 0xC671, Data3: 0x4174, Data4: [8]byte{0x8D, 0x81, 0xDE, 0xFC, 0xD3, 0xF0, 0x31, 0x86}}
	clsidNetFwRule    = windows.GUID{Data1: 0x2C5BC43E, Data2: 0x3369, Data3: 0x4C33, Data4: [8]byte{0xAB, 0x0C, 0xBE, 0x94, 0x69, 0x67, 0x7A, 0xF4}}
	iidINetFwRule     = windows.GUID{Data1: 0xAF230D27, Data2: 0xBABA, Data3: 0x4E42, Data4: [8]byte{0xAC, 0xED, 0xF5, 0x24, 0xF2, 0x2C, 0xFC, 0xE2}}
)

// Vtable slots (netfw.h): IUnknown is 0-2, IDispatch 3-6.
const (
	slotRelease = 2

	slotPolicyGetRules = 18

	slotRulesAdd    = 8
	slotRulesRemove = 9
	slotRulesItem   = 10

	slotRuleGetName        = 7
	slotRuleGetDescription = 9
	slotRuleGetProtocol    = 15
	slotRuleGetLocalPorts  = 17
	slotRuleGetDirection   = 27
	slotRuleGetEnabled     = 33
	slotRuleGetGrouping    = 35
	slotRuleGetProfiles    = 37
	slotRuleGetAction      = 41
	// Each put_X is get_X + 1.
)

// HRESULTs the firewall calls map.
const (
	hrSFalse           = 1
	hrENotImpl         = 0x80004001
	hrClassNotReg      = 0x80040154
	hrFileNotFound     = 0x80070002 // HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND)
	hrAccessDenied     = 0x80070005
	hrRPCChangedMode   = 0x80010106
	coinitMultithread  = 0x0
	clsctxInprocServer = 0x1
)

// comObj is a COM interface pointer.
type comObj struct{ p unsafe.Pointer }

// call invokes vtable slot n with the object as its first argument.
func (o comObj) call(n int, args ...uintptr) error {
	vtbl := *(*unsafe.Pointer)(o.p)
	fn := *(*uintptr)(unsafe.Add(vtbl, n*int(unsafe.Sizeof(uintptr(0)))))
	hr, _, _ := syscall.SyscallN(fn, append([]uintptr{uintptr(o.p)}, args...)...)
	return hresult(uint32(hr))
}

func (o comObj) release() { o.call(slotRelease) } //nolint:errcheck // Release returns a count, not an HRESULT

// hrError is a failed HRESULT. Not implemented (Wine's stubs) and a
// missing class unwrap to host.ErrNotSupported, access denied to
// ERROR_ACCESS_DENIED (fs.ErrPermission).
type hrError uint32

func (e hrError) Error() string {
	if errors.Is(e, host.ErrNotSupported) {
		return fmt.Sprintf("HRESULT 0x%08X: %v (%s)", uint32(e), host.ErrNotSupported, platform)
	}
	return fmt.Sprintf("HRESULT 0x%08X", uint32(e))
}

func (e hrError) Unwrap() error {
	switch e {
	case hrENotImpl, hrClassNotReg:
		return host.ErrNotSupported
	case hrAccessDenied:
		return windows.ERROR_ACCESS_DENIED
	}
	return nil
}

func hresult(hr uint32) error {
	if int32(hr) >= 0 {
		return nil
	}
	return hrError(hr)
}

func createInstance(clsid, iid *windows.GUID) (comObj, error) {
	var p unsafe.Pointer
	hr, _, _ := procCoCreateInstance.Call(uintptr(unsafe.Pointer(clsid)), 0, clsctxInprocServer,
		uintptr(unsafe.Pointer(iid)), uintptr(unsafe.Pointer(&p)))
	if err := hresult(uint32(hr)); err != nil {
		return comObj{}, err
	}
	return comObj{p}, nil
}

// bstr is a BSTR the caller frees with free.
type bstr uintptr

func newBSTR(s string) (bstr, error) {
	u, err := windows.UTF16PtrFromString(s)
	if err != nil {
		return 0, err
	}
	b, _, _ := procSysAllocString.Call(uintptr(unsafe.Pointer(u)))
	if b == 0 {
		return 0, errors.New("SysAllocString: out of memory")
	}
	return bstr(b), nil
}

func (b bstr) free() { procSysFreeString.Call(uintptr(b)) } //nolint:errcheck // returns nothing

// withCOM runs f on one OS thread joined to the multithreaded apartment.
func withCOM(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if procCoCreateInstance.Find() != nil {
		return host.NotSupported("firewall rules", platform)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch err := windows.CoInitializeEx(0, coinitMultithread); {
	case err == nil || err == syscall.Errno(hrSFalse):
		defer windows.CoUninitialize()
	case err == syscall.Errno(hrRPCChangedMode):
		// Already in an apartment on this thread: use it.
	default:
		return fmt.Errorf("CoInitializeEx: %w", err)
	}
	return f()
}

// withFirewall runs f with the local policy's rule collection.
func withFirewall(ctx context.Context, f func(fwStore) error) error {
	return withCOM(ctx, func() error { return withRules(f) })
}

func withRules(f func(fwStore) error) error {
	policy, err := createInstance(&clsidNetFwPolicy2, &iidINetFwPolicy2)
	if err != nil {
		return fmt.Errorf("open the firewall policy (NetFwPolicy2): %w", err)
	}
	defer policy.release()
	var rp unsafe.Pointer
	if err := policy.call(slotPolicyGetRules, uintptr(unsafe.Pointer(&rp))); err != nil {
		return fmt.Errorf("firewall rules (INetFwPolicy2.Rules): %w", err)
	}
	rules := comObj{rp}
	defer rules.release()
	return f(comRules{rules})
}

// comRules is fwStore on INetFwRules.
type comRules struct{ rules comObj }

func (s comRules) Item(name string) (comRule, error) {
	b, err := newBSTR(name)
	if err != nil {
		return comRule{}, err
	}
	defer b.free()
	var rp unsafe.Pointer
	hr := s.rules.call(slotRulesItem, uintptr(b), uintptr(unsafe.Pointer(&rp)))
	if hr != nil {
		if e, ok := errors.AsType[hrError](hr); ok && e == hrFileNotFound {
			return comRule{}, errNoRule
		}
		return comRule{}, fmt.Errorf("INetFwRules.Item: %w", hr)
	}
	rule := comObj{rp}
	defer rule.release()
	return readRule(rule)
}

func readRule(o comObj) (comRule, error) {
	var c comRule
	var enabled int16
	steps := []error{
		getString(o, slotRuleGetName, &c.Name),
		getString(o, slotRuleGetDescription, &c.Description),
		getString(o, slotRuleGetGrouping, &c.Grouping),
		getLong(o, slotRuleGetProtocol, &c.Protocol),
		getString(o, slotRuleGetLocalPorts, &c.LocalPorts),
		getLong(o, slotRuleGetDirection, &c.Direction),
		getLong(o, slotRuleGetAction, &c.Action),
		getLong(o, slotRuleGetProfiles, &c.Profiles),
		o.call(slotRuleGetEnabled, uintptr(unsafe.Pointer(&enabled))),
	}
	c.Enabled = enabled != 0
	if err := errors.Join(steps...); err != nil {
		return comRule{}, fmt.Errorf("read INetFwRule: %w", err)
	}
	return c, nil
}

func getString(o comObj, slot int, out *string) error {
	var b *uint16
	if err := o.call(slot, uintptr(unsafe.Pointer(&b))); err != nil {
		return err
	}
	if b != nil {
		*out = windows.UTF16PtrToString(b)
		bstr(unsafe.Pointer(b)).free()
	}
	return nil
}

func getLong(o comObj, slot int, out *int32) error {
	return o.call(slot, uintptr(unsafe.Pointer(out)))
}

func putString(o comObj, getSlot int, s string) error {
	b, err := newBSTR(s)
	if err != nil {
		return err
	}
	defer b.free()
	return o.call(getSlot+1, uintptr(b))
}

func (s comRules) Add(c comRule) error {
	rule, err := newRule(c)
	if err != nil {
		return err
	}
	defer rule.release()
	if err := s.rules.call(slotRulesAdd, uintptr(rule.p)); err != nil {
		return fmt.Errorf("INetFwRules.Add: %w", err)
	}
	return nil
}

// newRule makes a NetFwRule object holding c; the caller releases it.
func newRule(c comRule) (comObj, error) {
	rule, err := createInstance(&clsidNetFwRule, &iidINetFwRule)
	if err != nil {
		return comObj{}, fmt.Errorf("new rule (NetFwRule): %w", err)
	}
	enabled := uintptr(0)
	if c.Enabled {
		enabled = 0xFFFF // VARIANT_TRUE
	}
	// Protocol before ports: a rule for any protocol refuses ports.
	steps := []struct {
		what string
		do   func() error
	}{
		{"Name", func() error { return putString(rule, slotRuleGetName, c.Name) }},
		{"Description", func() error { return optString(rule, slotRuleGetDescription, c.Description) }},
		{"Grouping", func() error { return optString(rule, slotRuleGetGrouping, c.Grouping) }},
		{"Protocol", func() error { return rule.call(slotRuleGetProtocol+1, uintptr(uint32(c.Protocol))) }},
		{"LocalPorts", func() error { return optString(rule, slotRuleGetLocalPorts, ports(c.LocalPorts)) }},
		{"Direction", func() error { return rule.call(slotRuleGetDirection+1, uintptr(uint32(c.Direction))) }},
		{"Action", func() error { return rule.call(slotRuleGetAction+1, uintptr(uint32(c.Action))) }},
		{"Profiles", func() error { return rule.call(slotRuleGetProfiles+1, uintptr(uint32(c.Profiles))) }},
		{"Enabled", func() error { return rule.call(slotRuleGetEnabled+1, enabled) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			rule.release()
			return comObj{}, fmt.Errorf("INetFwRule.%s: %w", st.what, err)
		}
	}
	return rule, nil
}

// FirewallRuleRoundTrip puts rule into a new NetFwRule object and reads it
// back, with the code SetFirewallRule and FirewallRule use: the Wine tier
// checks the vtable slots, BSTRs and value conversion on Wine's INetFwRule,
// whose rule collection (Item, Add, Remove) Wine does not implement.
func FirewallRuleRoundTrip(ctx context.Context, rule host.FirewallRule) (host.FirewallRule, error) {
	if err := rule.Validate(); err != nil {
		return host.FirewallRule{}, err
	}
	var out host.FirewallRule
	err := withCOM(ctx, func() error {
		o, err := newRule(toCOM(rule))
		if err != nil {
			return err
		}
		defer o.release()
		c, err := readRule(o)
		if err != nil {
			return err
		}
		out = fromCOM(c)
		return nil
	})
	return out, err
}

// ports leaves "*" (any, a new rule's value) unset.
func ports(p string) string {
	if p == "*" {
		return ""
	}
	return p
}

func optString(o comObj, slot int, s string) error {
	if s == "" {
		return nil
	}
	return putString(o, slot, s)
}

func (s comRules) Remove(name string) error {
	b, err := newBSTR(name)
	if err != nil {
		return err
	}
	defer b.free()
	if err := s.rules.call(slotRulesRemove, uintptr(b)); err != nil {
		return fmt.Errorf("INetFwRules.Remove: %w", err)
	}
	return nil
}

func (h *winHost) FirewallRule(ctx context.Context, name string) (host.FirewallRule, error) {
	var r host.FirewallRule
	err := withFirewall(ctx, func(s fwStore) error {
		var err error
		r, err = getRule(s, name)
		return err
	})
	return r, err
}

func (h *winHost) SetFirewallRule(ctx context.Context, rule host.FirewallRule) error {
	if err := rule.Validate(); err != nil {
		return err
	}
	return withFirewall(ctx, func(s fwStore) error { return setRule(s, rule) })
}

func (h *winHost) DeleteFirewallRule(ctx context.Context, name string) error {
	return withFirewall(ctx, func(s fwStore) error { return deleteRule(s, name) })
}
