package osnet

import "net"

// OutboundIPv4 asks the stack which source address would reach the
// internet, for when the route table cannot be read. A UDP "connection"
// sends no packet, so this is free and works offline.
func OutboundIPv4() string {
	c, err := net.Dial("udp4", "192.0.2.1:9") // TEST-NET-1, never routed for real
	if err != nil {
		return ""
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil && !a.IP.IsUnspecified() {
		return a.IP.String()
	}
	return ""
}

// FirstIPv4 is the first global IPv4 address of an interface's addresses,
// falling back to a link-local one; "" when there is none.
func FirstIPv4(ips []net.IP) string {
	fallback := ""
	for _, ip := range ips {
		ip = ip.To4()
		if ip == nil {
			continue
		}
		if ip.IsLinkLocalUnicast() {
			if fallback == "" {
				fallback = ip.String()
			}
			continue
		}
		return ip.String()
	}
	return fallback
}
