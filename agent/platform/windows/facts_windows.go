//go:build windows

package windows

import (
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osnet"
)

func gatherFacts() (host.Facts, error) {
	name, err := os.Hostname()
	if err != nil {
		return host.Facts{}, fmt.Errorf("facts: hostname: %w", err)
	}
	// RtlGetVersion, unlike GetVersionEx, is not lied to by the manifest.
	v := windows.RtlGetVersion()
	f := host.Facts{
		OS:           "windows",
		Platform:     "windows",
		Version:      fmt.Sprintf("%d.%d", v.MajorVersion, v.MinorVersion),
		Build:        strconv.FormatUint(uint64(v.BuildNumber), 10),
		Hostname:     name,
		FQDN:         computerName(windows.ComputerNameDnsFullyQualified, name),
		Architecture: runtime.GOARCH,
		IPv4:         defaultIPv4(),
	}
	// Best effort, as the address: a host without it cannot be rebooted
	// by win_reboot, which says so.
	f.BootTime, _ = bootTime()
	return f, nil
}

// computerName asks GetComputerNameEx for one of its name forms, falling
// back when the machine has none (no DNS domain: the FQDN is the hostname).
func computerName(format uint32, fallback string) string {
	n := uint32(256)
	for range 2 {
		buf := make([]uint16, n)
		err := windows.GetComputerNameEx(format, &buf[0], &n)
		if err == nil {
			if s := windows.UTF16ToString(buf[:n]); s != "" {
				return s
			}
			return fallback
		}
		if err != windows.ERROR_MORE_DATA {
			return fallback
		}
	}
	return fallback
}

// defaultIPv4 is the address of the interface holding the IPv4 default
// route with the lowest metric; "" when there is none. Best effort.
func defaultIPv4() string {
	var table *windows.MibIpForwardTable2
	if err := windows.GetIpForwardTable2(windows.AF_INET, &table); err != nil {
		return osnet.OutboundIPv4()
	}
	defer windows.FreeMibTable(unsafe.Pointer(table))
	best, bestMetric := uint32(0), uint32(math.MaxUint32)
	found := false
	for _, r := range table.Rows() {
		if r.DestinationPrefix.PrefixLength != 0 || r.Loopback != 0 {
			continue
		}
		if !found || r.Metric < bestMetric {
			best, bestMetric, found = r.InterfaceIndex, r.Metric, true
		}
	}
	if !found {
		return ""
	}
	return interfaceIPv4(best)
}

// interfaceIPv4 returns the first global IPv4 address of an interface,
// falling back to a link-local one.
func interfaceIPv4(index uint32) string {
	var table *windows.MibUnicastIpAddressTable
	if err := windows.GetUnicastIpAddressTable(windows.AF_INET, &table); err != nil {
		return ""
	}
	defer windows.FreeMibTable(unsafe.Pointer(table))
	rows := unsafe.Slice(&table.Table[0], table.NumEntries)
	var ips []net.IP
	for i := range rows {
		r := &rows[i]
		if r.InterfaceIndex != index || r.Address.Family != windows.AF_INET {
			continue
		}
		sa := (*windows.RawSockaddrInet4)(unsafe.Pointer(&r.Address))
		ips = append(ips, net.IP(sa.Addr[:]))
	}
	return osnet.FirstIPv4(ips)
}
