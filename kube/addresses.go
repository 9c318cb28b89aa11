package kube

import (
	"context"
	"net"
	"strings"
	"time"
)

// resolveTimeout bounds the look-up of one admin-given DNS address.
const resolveTimeout = 2 * time.Second

// WithResolved is addrs with, after them, the IPs each entry that is a
// DNS name resolves to on this machine. A serving certificate may name
// the IPs of the address the admin gave a host (a BYOH entry's DNS name),
// looked up by wsu, never by the host; a name that does not resolve adds
// nothing.
func WithResolved(ctx context.Context, addrs []string) []string {
	out := append([]string(nil), addrs...)
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" || net.ParseIP(a) != nil {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		ips, err := net.DefaultResolver.LookupIPAddr(lctx, a)
		cancel()
		if err != nil {
			continue
		}
		for _, ip := range ips {
			out = append(out, ip.IP.String())
		}
	}
	return out
}
