package kube

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RuleServingClusterNames refuses a serving certificate naming the
// cluster's own API: whoever holds one can pose as the API server to
// anything that trusts the kubelet-serving CA (the cluster CA, on
// kubeadm), so no node may have one, whatever it or its instance says.
const RuleServingClusterNames = "serving-cluster-names"

// The API server's in-cluster names, from the kubernetes Service.
var clusterServiceNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc"}

// ClusterAddresses are the names and addresses no node's serving
// certificate may carry: the service networks and the API server's own
// addresses. Read them with ReadClusterAddresses; the names are fixed
// (clusterServiceNames and kubernetes.default.svc.<anything>).
type ClusterAddresses struct {
	// ServiceNetworks are the service CIDRs known: the ServiceCIDR
	// "kubernetes" where the cluster serves it, and any the caller read
	// elsewhere (join's k8s_cluster_network).
	ServiceNetworks []netip.Prefix
	// APIServer are the kubernetes Service's cluster IPs and the API
	// server's endpoint addresses.
	APIServer []netip.Addr
}

// AddServiceNetworks adds CIDRs given as text, refusing a malformed one.
func (c *ClusterAddresses) AddServiceNetworks(cidrs ...string) error {
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("service network %q: %w", s, err)
		}
		c.ServiceNetworks = append(c.ServiceNetworks, p.Masked())
	}
	return nil
}

// ReadClusterAddresses reads what the cluster exposes about its own API:
// the default/kubernetes Service's cluster IPs, the API server's addresses
// in the EndpointSlice default/kubernetes (the Endpoints of that name
// where there is no slice), and the service network from the ServiceCIDR
// "kubernetes" (Kubernetes 1.33 and later; absent elsewhere). The Service
// and the endpoints exist in every cluster: failing to read them is an
// error, and the caller approves no serving CSR without them.
func ReadClusterAddresses(ctx context.Context, kc kubernetes.Interface) (ClusterAddresses, error) {
	var c ClusterAddresses
	svc, err := kc.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return c, fmt.Errorf("reading the Service default/kubernetes: %w", err)
	}
	for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		c.addAddr(ip)
	}
	if err := c.readEndpoints(ctx, kc); err != nil {
		return c, err
	}
	cidr, err := kc.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	switch {
	case err == nil:
		if err := c.AddServiceNetworks(cidr.Spec.CIDRs...); err != nil {
			return c, fmt.Errorf("the ServiceCIDR \"kubernetes\": %w", err)
		}
	case !apierrors.IsNotFound(err):
		return c, fmt.Errorf("reading the ServiceCIDR \"kubernetes\": %w", err)
	}
	return c, nil
}

// readEndpoints adds the API server's endpoint addresses.
func (c *ClusterAddresses) readEndpoints(ctx context.Context, kc kubernetes.Interface) error {
	slice, err := kc.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err == nil {
		for _, e := range slice.Endpoints {
			for _, a := range e.Addresses {
				c.addAddr(a)
			}
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the EndpointSlice default/kubernetes: %w", err)
	}
	ep, err := kc.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the API server's endpoints (EndpointSlice or Endpoints default/kubernetes): %w", err)
	}
	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			c.addAddr(a.IP)
		}
	}
	return nil
}

func (c *ClusterAddresses) addAddr(s string) {
	if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
		c.APIServer = append(c.APIServer, a.Unmap())
	}
}

// refusedName says why a DNS SAN names the cluster's API, or "".
func refusedName(dns string) string {
	n := normaliseDNS(dns)
	for _, s := range clusterServiceNames {
		if n == s {
			return fmt.Sprintf("DNS name %q is the API server's in-cluster name", dns)
		}
	}
	if strings.HasPrefix(n, "kubernetes.default.svc.") {
		return fmt.Sprintf("DNS name %q is the API server's in-cluster name (kubernetes.default.svc.<cluster domain>)", dns)
	}
	return ""
}

// refusedIP says why an IP SAN is one of the cluster's own, or "".
func (c *ClusterAddresses) refusedIP(ip net.IP) string {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return ""
	}
	a = a.Unmap()
	for _, s := range c.APIServer {
		if s == a {
			return fmt.Sprintf("IP address %s is the API server's (the kubernetes Service or its endpoints)", ip)
		}
	}
	for _, p := range c.ServiceNetworks {
		if p.Contains(a) {
			return fmt.Sprintf("IP address %s is in the service network %s", ip, p)
		}
	}
	return ""
}

// checkClusterNames refuses any SAN naming the cluster's API. cluster nil
// means its addresses could not be read: then no serving CSR passes.
func checkClusterNames(dnsNames []string, ips []net.IP, cluster *ClusterAddresses) error {
	for _, d := range dnsNames {
		if why := refusedName(d); why != "" {
			return ruleErr(RuleServingClusterNames, "%s; no node may serve under it", why)
		}
	}
	if cluster == nil {
		return ruleErr(RuleServingClusterNames, "the cluster's own addresses (the kubernetes Service and the API server's endpoints) were not read, so no serving certificate is approved")
	}
	for _, ip := range ips {
		if why := cluster.refusedIP(ip); why != "" {
			return ruleErr(RuleServingClusterNames, "%s; no node may serve under it", why)
		}
	}
	return nil
}
