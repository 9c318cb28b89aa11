package funcs

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// parseCIDR parses an IPv4 or IPv6 prefix in CIDR notation. Host bits set in
// the address are cleared, so "10.1.2.3/8" means 10.0.0.0/8.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		reason := strings.TrimPrefix(err.Error(), fmt.Sprintf("netip.ParsePrefix(%q): ", s))
		return netip.Prefix{}, fmt.Errorf("invalid CIDR expression %q: %s", s, reason)
	}
	return p.Masked(), nil
}

// wholeNumber converts a cty number to an integer, rejecting fractions.
func wholeNumber(v cty.Value, argIdx int, what string) (*big.Int, error) {
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return nil, function.NewArgErrorf(argIdx, "%s must be a whole number", what)
	}
	n, _ := bf.Int(nil)
	return n, nil
}

func addrToInt(a netip.Addr) *big.Int {
	return new(big.Int).SetBytes(a.AsSlice())
}

func intToAddr(n *big.Int, like netip.Addr) netip.Addr {
	buf := make([]byte, like.BitLen()/8)
	n.FillBytes(buf)
	a, _ := netip.AddrFromSlice(buf)
	return a
}

// pow2 returns 2**n.
func pow2(n int) *big.Int {
	return new(big.Int).Lsh(big.NewInt(1), uint(n))
}

var cidrHostFunc = function.New(&function.Spec{
	Description: "Returns the address of host number hostnum within prefix; negative numbers count back from the end of the range.",
	Params: []function.Parameter{
		{Name: "prefix", Type: cty.String},
		{Name: "hostnum", Type: cty.Number},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parseCIDR(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), function.NewArgError(0, err)
		}
		hostnum, err := wholeNumber(args[1], 1, "hostnum")
		if err != nil {
			return cty.UnknownVal(cty.String), err
		}
		size := pow2(p.Addr().BitLen() - p.Bits())
		n := new(big.Int).Set(hostnum)
		if n.Sign() < 0 {
			n.Add(n, size)
		}
		if n.Sign() < 0 || n.Cmp(size) >= 0 {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "prefix of %d bits cannot accommodate a host numbered %s", p.Bits(), hostnum)
		}
		n.Add(n, addrToInt(p.Addr()))
		return cty.StringVal(intToAddr(n, p.Addr()).String()), nil
	},
})

var cidrNetmaskFunc = function.New(&function.Spec{
	Description: "Returns the dotted-decimal netmask of an IPv4 prefix.",
	Params: []function.Parameter{
		{Name: "prefix", Type: cty.String},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parseCIDR(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), function.NewArgError(0, err)
		}
		if !p.Addr().Is4() {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "IPv6 addresses cannot have a netmask: %s", args[0].AsString())
		}
		mask := uint32(0xffffffff) << (32 - p.Bits())
		if p.Bits() == 0 {
			mask = 0
		}
		a := netip.AddrFrom4([4]byte{byte(mask >> 24), byte(mask >> 16), byte(mask >> 8), byte(mask)})
		return cty.StringVal(a.String()), nil
	},
})

var cidrSubnetFunc = function.New(&function.Spec{
	Description: "Returns subnet number netnum of prefix extended by newbits bits.",
	Params: []function.Parameter{
		{Name: "prefix", Type: cty.String},
		{Name: "newbits", Type: cty.Number},
		{Name: "netnum", Type: cty.Number},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parseCIDR(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), function.NewArgError(0, err)
		}
		nb, err := wholeNumber(args[1], 1, "newbits")
		if err != nil {
			return cty.UnknownVal(cty.String), err
		}
		netnum, err := wholeNumber(args[2], 2, "netnum")
		if err != nil {
			return cty.UnknownVal(cty.String), err
		}
		if nb.Sign() < 0 {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "newbits must not be negative")
		}
		addrBits := p.Addr().BitLen()
		if !nb.IsInt64() || int64(p.Bits())+nb.Int64() > int64(addrBits) {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "insufficient address space to extend prefix of %d by %s", p.Bits(), nb)
		}
		newBits := int(nb.Int64())
		newLen := p.Bits() + newBits
		if netnum.Sign() < 0 || netnum.Cmp(pow2(newBits)) >= 0 {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(2, "prefix extension of %d does not accommodate a subnet numbered %s", newBits, netnum)
		}
		n := new(big.Int).Lsh(netnum, uint(addrBits-newLen))
		n.Add(n, addrToInt(p.Addr()))
		return cty.StringVal(netip.PrefixFrom(intToAddr(n, p.Addr()), newLen).String()), nil
	},
})

var cidrContainsFunc = function.New(&function.Spec{
	Description: "Reports whether an IP address or prefix lies entirely within containing_prefix.",
	Params: []function.Parameter{
		{Name: "containing_prefix", Type: cty.String},
		{Name: "contained_ip_or_prefix", Type: cty.String},
	},
	Type: function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		outer, err := parseCIDR(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.Bool), function.NewArgError(0, err)
		}
		s := args[1].AsString()
		var inner netip.Prefix
		if strings.Contains(s, "/") {
			inner, err = parseCIDR(s)
			if err != nil {
				return cty.UnknownVal(cty.Bool), function.NewArgError(1, err)
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				reason := strings.TrimPrefix(err.Error(), fmt.Sprintf("ParseAddr(%q): ", s))
				return cty.UnknownVal(cty.Bool), function.NewArgErrorf(1, "invalid IP address %q: %s", s, reason)
			}
			inner = netip.PrefixFrom(a, a.BitLen())
		}
		if outer.Addr().Is4() != inner.Addr().Is4() {
			return cty.UnknownVal(cty.Bool), fmt.Errorf("address family mismatch: %s vs. %s", args[0].AsString(), s)
		}
		return cty.BoolVal(outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())), nil
	},
})
