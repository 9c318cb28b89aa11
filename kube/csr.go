package kube

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// CSR kinds a joining kubelet requests, in the order it requests them.
const (
	CSRClient  = "client"
	CSRServing = "serving"
)

// Who may ask for a kubelet client certificate.
const (
	// OpenShiftBootstrapper is the identity in the MCS's bootstrap kubeconfig.
	OpenShiftBootstrapper = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
	// BootstrapUserPrefix + token id is a kubeadm bootstrap token's identity.
	BootstrapUserPrefix = "system:bootstrap:"
)

const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
	authnGroup     = "system:authenticated"
)

// The rules Validate checks, named in its errors and in a module's rejected
// list. They are WMCO's approval rules plus the signers' own constraints.
const (
	RuleRequest          = "request"           // spec.request is a parseable, self-signed PKCS#10 request
	RuleSigner           = "signer"            // a kubelet client or serving signer
	RuleCNPrefix         = "cn-prefix"         // CN starts with system:node:
	RuleNodeName         = "node-name"         // CN names the expected node
	RuleOrganization     = "organization"      // organisation exactly [system:nodes]
	RuleClientSANs       = "client-no-sans"    // client: no DNS, IP, email or URI SANs
	RuleClientUsages     = "client-usages"     // client: {digital signature, [key encipherment,] client auth}
	RuleClientRequester  = "client-requester"  // client: requested by the bootstrap identity
	RuleNodeExists       = "node-exists"       // client: no Node of that name yet
	RuleServingRequester = "serving-requester" // serving: requested by system:node:<name>
	RuleServingGroups    = "serving-groups"    // serving: requester in system:nodes and system:authenticated
	RuleServingUsages    = "serving-usages"    // serving: server auth, plus only digital signature/key encipherment
	RuleServingSANs      = "serving-sans"      // serving: IP/DNS SANs all the instance's, none other
)

// Expectation is what Validate knows about the instance that is joining.
type Expectation struct {
	// NodeName is the name the node registers as (compared in lower case,
	// as the kubelet lower-cases it).
	NodeName string
	// Addresses are the instance's IP addresses; entries that are not IPs
	// count as host names.
	Addresses []string
	// Hostnames are the instance's DNS names.
	Hostnames []string
	// ClientRequesters are the usernames allowed to request a client
	// certificate; empty means OpenShiftBootstrapper only.
	ClientRequesters []string
	// NodeExists says a Node named NodeName is already registered, which
	// means a client CSR is not the first join's and must not be approved.
	NodeExists bool
}

// RuleError is a CSR failing one approval rule.
type RuleError struct {
	Rule   string
	Detail string
}

func (e *RuleError) Error() string { return fmt.Sprintf("rule %s: %s", e.Rule, e.Detail) }

func ruleErr(rule, format string, args ...any) error {
	return &RuleError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

var (
	clientUsagesFull = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	clientUsagesMin  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	servingAllowed   = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
)

// CSRKind returns the kind a CSR's signer makes it, or "".
func CSRKind(csr *certificatesv1.CertificateSigningRequest) string {
	switch csr.Spec.SignerName {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		return CSRClient
	case certificatesv1.KubeletServingSignerName:
		return CSRServing
	}
	return ""
}

// ParseCSRRequest decodes spec.request and checks its self-signature.
func ParseCSRRequest(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, ruleErr(RuleRequest, "spec.request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, ruleErr(RuleRequest, "spec.request does not parse: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, ruleErr(RuleRequest, "spec.request's signature does not verify: %v", err)
	}
	return req, nil
}

// Validate decides whether a kubelet CSR may be approved for the expected
// node. It returns the CSR's kind ("client" or "serving", "" for another
// signer) and nil, or the first rule it breaks as a *RuleError. Approving
// anything that is not checked here would hand out node credentials, so
// every rule must hold.
func Validate(csr *certificatesv1.CertificateSigningRequest, want Expectation) (kind string, err error) {
	kind = CSRKind(csr)
	if kind == "" {
		return "", ruleErr(RuleSigner, "signer %q is neither %s nor %s", csr.Spec.SignerName,
			certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeletServingSignerName)
	}
	req, err := ParseCSRRequest(csr)
	if err != nil {
		return kind, err
	}
	node := strings.ToLower(want.NodeName)
	if node == "" {
		return kind, ruleErr(RuleNodeName, "no node name is expected, so no CSR can match")
	}
	cn := req.Subject.CommonName
	name, ok := strings.CutPrefix(cn, nodeUserPrefix)
	if !ok {
		return kind, ruleErr(RuleCNPrefix, "common name %q does not start with %q", cn, nodeUserPrefix)
	}
	if name != node {
		return kind, ruleErr(RuleNodeName, "common name %q names node %q, not %q", cn, name, node)
	}
	if len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != nodesGroup {
		return kind, ruleErr(RuleOrganization, "organisation %q is not exactly [%q]", req.Subject.Organization, nodesGroup)
	}
	if kind == CSRClient {
		return kind, validateClient(csr, req, want)
	}
	return kind, validateServing(csr, req, node, want)
}

func validateClient(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, want Expectation) error {
	if sans := describeSANs(req); len(sans) > 0 {
		return ruleErr(RuleClientSANs, "a client certificate must have no subject alternative names, the request has %s", strings.Join(sans, ", "))
	}
	if !sameUsages(csr.Spec.Usages, clientUsagesFull) && !sameUsages(csr.Spec.Usages, clientUsagesMin) {
		return ruleErr(RuleClientUsages, "usages %q are not exactly [digital signature, key encipherment, client auth] or [digital signature, client auth]", csr.Spec.Usages)
	}
	requesters := want.ClientRequesters
	if len(requesters) == 0 {
		requesters = []string{OpenShiftBootstrapper}
	}
	if !slices.Contains(requesters, csr.Spec.Username) {
		return ruleErr(RuleClientRequester, "requested by %q, not by the bootstrap identity (%s)", csr.Spec.Username, strings.Join(requesters, " or "))
	}
	if want.NodeExists {
		return ruleErr(RuleNodeExists, "Node %q already exists, so this is not its first join", strings.ToLower(want.NodeName))
	}
	return nil
}

func validateServing(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, node string, want Expectation) error {
	if u := csr.Spec.Username; u != nodeUserPrefix+node {
		return ruleErr(RuleServingRequester, "requested by %q, not by the node itself (%s%s)", u, nodeUserPrefix, node)
	}
	for _, g := range []string{nodesGroup, authnGroup} {
		if !slices.Contains(csr.Spec.Groups, g) {
			return ruleErr(RuleServingGroups, "the requester's groups %q do not include %q", csr.Spec.Groups, g)
		}
	}
	if hasDuplicates(csr.Spec.Usages) {
		return ruleErr(RuleServingUsages, "usages %q repeat a usage", csr.Spec.Usages)
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		return ruleErr(RuleServingUsages, "usages %q do not include server auth", csr.Spec.Usages)
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(servingAllowed, u) {
			return ruleErr(RuleServingUsages, "usage %q is not one of digital signature, key encipherment, server auth", u)
		}
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return ruleErr(RuleServingSANs, "a serving certificate must have no email or URI names, the request has %s", strings.Join(describeSANs(req), ", "))
	}
	if len(req.IPAddresses) == 0 && len(req.DNSNames) == 0 {
		return ruleErr(RuleServingSANs, "the request names no IP address or DNS name to serve")
	}
	ips, names := instanceNames(want)
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return ruleErr(RuleServingSANs, "IP address %s is not one of the instance's addresses (%s)", ip, joinOrNone(want.Addresses))
		}
	}
	for _, dns := range req.DNSNames {
		if !slices.Contains(names, normaliseDNS(dns)) {
			return ruleErr(RuleServingSANs, "DNS name %q is not one of the instance's host names (%s)", dns, joinOrNone(want.Hostnames))
		}
	}
	return nil
}

// instanceNames splits the expectation into IPs and normalised DNS names.
func instanceNames(want Expectation) (ips []net.IP, names []string) {
	for _, a := range want.Addresses {
		if ip := net.ParseIP(strings.TrimSpace(a)); ip != nil {
			ips = append(ips, ip)
		} else if a = normaliseDNS(a); a != "" {
			names = append(names, a)
		}
	}
	for _, h := range want.Hostnames {
		if h = normaliseDNS(h); h != "" {
			names = append(names, h)
		}
	}
	return ips, names
}

func normaliseDNS(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none given"
	}
	return strings.Join(s, ", ")
}

// describeSANs lists a request's subject alternative names for an error,
// quoted: they are the requester's text and end up in warnings.
func describeSANs(req *x509.CertificateRequest) []string {
	var out []string
	for _, d := range req.DNSNames {
		out = append(out, fmt.Sprintf("DNS:%q", d))
	}
	for _, ip := range req.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, e := range req.EmailAddresses {
		out = append(out, fmt.Sprintf("email:%q", e))
	}
	for _, u := range req.URIs {
		out = append(out, fmt.Sprintf("URI:%q", u.String()))
	}
	return out
}

// sameUsages compares as sets, but a repeated usage never matches: the
// rule is "exactly", and a padded list is not a kubelet's.
func sameUsages(got, want []certificatesv1.KeyUsage) bool {
	if len(got) != len(want) || hasDuplicates(got) {
		return false
	}
	for _, u := range want {
		if !slices.Contains(got, u) {
			return false
		}
	}
	return true
}

func hasDuplicates(u []certificatesv1.KeyUsage) bool {
	s := slices.Clone(u)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return len(slices.Compact(s)) != len(u)
}
