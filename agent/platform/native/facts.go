package native

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osnet"
)

// fqdnTimeout bounds the DNS lookups behind FQDN; a host without working DNS
// must not stall every play that asks for facts.
const fqdnTimeout = 2 * time.Second

func gatherFacts(ctx context.Context) (host.Facts, error) {
	name, err := os.Hostname()
	if err != nil {
		return host.Facts{}, fmt.Errorf("facts: hostname: %w", err)
	}
	f := host.Facts{
		OS:           runtime.GOOS,
		Platform:     runtime.GOOS,
		Hostname:     name,
		FQDN:         lookupFQDN(ctx, name),
		Architecture: runtime.GOARCH,
		IPv4:         defaultIPv4(),
	}
	if runtime.GOOS == "linux" {
		if r, err := os.Open("/etc/os-release"); err == nil {
			id, version := parseOSRelease(r)
			r.Close()
			if id != "" {
				f.Platform = id
			}
			f.Version = version
		}
		if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
			f.Build = strings.TrimSpace(string(b))
		}
	}
	return f, nil
}

// parseOSRelease returns ID and VERSION_ID from an os-release file.
func parseOSRelease(r io.Reader) (id, version string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		} else {
			val = strings.Trim(val, `'"`)
		}
		switch key {
		case "ID":
			id = val
		case "VERSION_ID":
			version = val
		}
	}
	return id, version
}

// lookupFQDN is best effort: the canonical DNS name when the resolver knows
// one, else the plain hostname.
func lookupFQDN(ctx context.Context, name string) string {
	if strings.Contains(name, ".") {
		return name
	}
	ctx, cancel := context.WithTimeout(ctx, fqdnTimeout)
	defer cancel()
	r := net.DefaultResolver
	if cname, err := r.LookupCNAME(ctx, name); err == nil {
		if cname = strings.TrimSuffix(cname, "."); strings.Contains(cname, ".") {
			return cname
		}
	}
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return name
	}
	for _, a := range addrs {
		names, err := r.LookupAddr(ctx, a)
		if err != nil {
			continue
		}
		for _, n := range names {
			n = strings.TrimSuffix(n, ".")
			if strings.HasPrefix(strings.ToLower(n), strings.ToLower(name)+".") {
				return n
			}
		}
	}
	return name
}

// defaultIPv4 returns the IPv4 address of the interface holding the default
// route, or "" when there is none.
func defaultIPv4() string {
	if runtime.GOOS != "linux" {
		return osnet.OutboundIPv4()
	}
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return ""
	}
	defer f.Close()
	iface := parseDefaultRoute(f)
	if iface == "" {
		return ""
	}
	return interfaceIPv4(iface)
}

// parseDefaultRoute returns the interface of the lowest-metric default route
// in /proc/net/route format, or "".
func parseDefaultRoute(r io.Reader) string {
	const rtfUp = 0x1
	sc := bufio.NewScanner(r)
	best, bestMetric := "", int64(math.MaxInt64)
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if first || len(fields) < 8 {
			continue
		}
		flags, err := strconv.ParseUint(fields[3], 16, 32)
		if err != nil || flags&rtfUp == 0 {
			continue
		}
		if fields[1] != "00000000" || fields[7] != "00000000" {
			continue
		}
		metric, err := strconv.ParseInt(fields[6], 10, 64)
		if err != nil {
			continue
		}
		if metric < bestMetric {
			best, bestMetric = fields[0], metric
		}
	}
	return best
}

// interfaceIPv4 returns the first global IPv4 address of an interface,
// falling back to a link-local one.
func interfaceIPv4(name string) string {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return ""
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return ""
	}
	var ips []net.IP
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			ips = append(ips, ipn.IP)
		}
	}
	return osnet.FirstIPv4(ips)
}
