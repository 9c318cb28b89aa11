package kube

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
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
// list. They are WMCO's and cluster-machine-approver's approval rules plus
// the signers' own constraints.
const (
	RuleRequest          = "request"           // spec.request is a parseable, self-signed PKCS#10 request
	RuleKey              = "key"               // RSA 2048-8192 bits or ECDSA P-256/P-384
	RuleSigner           = "signer"            // a kubelet client or serving signer
	RuleCNPrefix         = "cn-prefix"         // CN starts with system:node:
	RuleNodeName         = "node-name"         // CN names the expected node
	RuleOrganization     = "organization"      // organisation exactly [system:nodes]
	RuleNotBefore        = "not-before"        // created no earlier than the join (less CSRClockSkew)
	RuleClientSANs       = "client-no-sans"    // client: no DNS, IP, email or URI SANs
	RuleClientUsages     = "client-usages"     // client: {digital signature, [key encipherment,] client auth}
	RuleClientRequester  = "client-requester"  // client: the bootstrap identity (join) or the node itself (renewal)
	RuleNodeExists       = "node-exists"       // client, join: no Node of that name yet
	RuleClientOnce       = "client-once"       // client: one client certificate per join
	RuleNodeRegistered   = "node-registered"   // serving, and client renewal: the Node is registered
	RuleServingRequester = "serving-requester" // serving: requested by system:node:<name>
	RuleServingGroups    = "serving-groups"    // serving: requester in system:nodes and system:authenticated
	RuleServingUsages    = "serving-usages"    // serving: server auth, plus only digital signature/key encipherment
	RuleServingSANs      = "serving-sans"      // serving: IP/DNS SANs all the instance's, none other
	// RuleServingClusterNames (csr_cluster.go): serving, no SAN is the
	// cluster's API (kubernetes.default.svc..., the service network, the
	// API server's addresses).
	RuleServingNodeSANs = "serving-node-sans" // serving: IP/DNS SANs all in the Node's own status.addresses
)

// CSRClockSkew is how much earlier than Expectation.NotBefore a CSR may
// have been created and still count: NotBefore is read from wsu's clock,
// creationTimestamp from the API server's.
const CSRClockSkew = time.Minute

// Key sizes Validate approves for RSA. Below 2048 is weak; above 8192 no
// kubelet makes, and Go's TLS refuses such keys by default anyway.
const (
	MinRSABits = 2048
	MaxRSABits = 8192
)

// Expectation is what Validate knows about the instance that is joining
// (or, with Renewal, renewing): what was recorded about it, not what its
// CSRs claim.
type Expectation struct {
	// NodeName is the name the node registers as (compared in lower case,
	// as the kubelet lower-cases it).
	NodeName string
	// Addresses are the instance's IP addresses; entries that are not IPs
	// count as host names.
	Addresses []string
	// Hostnames are the instance's DNS names: what the admin gave (the
	// node name recorded at join, a DNS address), never what the host
	// says of itself.
	Hostnames []string
	// Cluster are the cluster's own addresses, which no serving
	// certificate may name. nil: not read, and then no serving CSR is
	// approved. NodeCSRs and CSRList.NodeCSRs read them when nil.
	Cluster *ClusterAddresses
	// ServiceNetworks are service CIDRs the caller knows beyond what the
	// cluster exposes to ReadClusterAddresses (join passes the one
	// k8s_cluster_network read); NodeCSRs adds them to Cluster.
	ServiceNetworks []string
	// ClientRequesters are the usernames allowed to request a client
	// certificate on a join; empty means OpenShiftBootstrapper only.
	// Renewals ignore them: the requester is the node itself.
	ClientRequesters []string
	// NotBefore is when the join (or the renewal window) began: a CSR
	// created more than CSRClockSkew earlier is refused (rule not-before),
	// and only CSRs from then on count for rule client-once. Zero is no
	// window at all, and then every CSR is refused: a judge that does not
	// know when its join began cannot tell a join's CSR from one left
	// pending hours before (a k8s_csr_approve run's start, the renewal
	// reconciler's window: every caller knows its own).
	NotBefore time.Time
	// Renewal switches the client rules from a first join to a kubelet
	// renewing its client certificate: requested by system:node:<name> in
	// system:nodes, and the Node must exist instead of not exist.
	Renewal bool
	// ClientCSR names the one client CSR this join has: already approved,
	// or chosen for approval. Any other client CSR is refused (rule
	// client-once). Judge fills it in from the CSRs it sees.
	ClientCSR string
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
	req, err := parseRequest(csr)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, ruleErr(RuleRequest, "spec.request's signature does not verify: %v", err)
	}
	return req, nil
}

// parseRequest decodes spec.request without checking its signature: enough
// to read whom it names, and to hold its key to the policy before the
// signature is verified with it.
func parseRequest(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, ruleErr(RuleRequest, "spec.request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, ruleErr(RuleRequest, "spec.request does not parse: %v", err)
	}
	return req, nil
}

// Validate decides whether a kubelet CSR may be approved for the expected
// node. node is the registered Node named want.NodeName, nil when there is
// none. It returns the CSR's kind ("client" or "serving", "" for another
// signer) and nil, or the first rule it breaks as a *RuleError. Approving
// anything that is not checked here would hand out node credentials, so
// every rule must hold. It is the one implementation of the rules: the
// join's k8s_csr_approve and renewal approvals both call it, through
// Judge.
func Validate(csr *certificatesv1.CertificateSigningRequest, want Expectation, node *corev1.Node) (kind string, err error) {
	kind = CSRKind(csr)
	if kind == "" {
		return "", ruleErr(RuleSigner, "signer %q is neither %s nor %s", csr.Spec.SignerName,
			certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeletServingSignerName)
	}
	req, err := parseRequest(csr)
	if err != nil {
		return kind, err
	}
	if err := checkKey(req); err != nil {
		return kind, err
	}
	if err := req.CheckSignature(); err != nil {
		return kind, ruleErr(RuleRequest, "spec.request's signature does not verify: %v", err)
	}
	nodeName := strings.ToLower(want.NodeName)
	if err := checkSubject(req, nodeName); err != nil {
		return kind, err
	}
	if err := checkCreated(csr, want.NotBefore); err != nil {
		return kind, err
	}
	if kind == CSRClient {
		return kind, validateClient(csr, req, nodeName, want, node)
	}
	return kind, validateServing(csr, req, nodeName, want, node)
}

// checkSubject holds the subject to system:node:<node> in system:nodes.
func checkSubject(req *x509.CertificateRequest, node string) error {
	if node == "" {
		return ruleErr(RuleNodeName, "no node name is expected, so no CSR can match")
	}
	cn := req.Subject.CommonName
	name, ok := strings.CutPrefix(cn, nodeUserPrefix)
	if !ok {
		return ruleErr(RuleCNPrefix, "common name %q does not start with %q", cn, nodeUserPrefix)
	}
	if name != node {
		return ruleErr(RuleNodeName, "common name %q names node %q, not %q", cn, name, node)
	}
	if len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != nodesGroup {
		return ruleErr(RuleOrganization, "organisation %q is not exactly [%q]", req.Subject.Organization, nodesGroup)
	}
	return nil
}

// checkKey is the key policy: what kubelets generate (ECDSA P-256, or RSA)
// and nothing weaker or stranger.
func checkKey(req *x509.CertificateRequest) error {
	switch k := req.PublicKey.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < MinRSABits || bits > MaxRSABits {
			return ruleErr(RuleKey, "RSA key of %d bits; only %d to %d bits are approved", bits, MinRSABits, MaxRSABits)
		}
		return nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return ruleErr(RuleKey, "ECDSA key on curve %s; only P-256 and P-384 are approved", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return ruleErr(RuleKey, "Ed25519 key; only RSA (%d-%d bits) and ECDSA P-256/P-384 keys are approved", MinRSABits, MaxRSABits)
	}
	return ruleErr(RuleKey, "%s key; only RSA (%d-%d bits) and ECDSA P-256/P-384 keys are approved", keyAlgorithm(req), MinRSABits, MaxRSABits)
}

func keyAlgorithm(req *x509.CertificateRequest) string {
	if req.PublicKeyAlgorithm == x509.UnknownPublicKeyAlgorithm {
		return "an unknown type of"
	}
	return req.PublicKeyAlgorithm.String()
}

// checkCreated is the time window: a CSR from before the join is not the
// join's, and without a window none is.
func checkCreated(csr *certificatesv1.CertificateSigningRequest, notBefore time.Time) error {
	if notBefore.IsZero() {
		return ruleErr(RuleNotBefore, "created %s, and no join window was given to judge it by (Expectation.NotBefore)",
			csr.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	if !inWindow(csr, notBefore) {
		return ruleErr(RuleNotBefore, "created %s, before this join began (%s, less %s of clock skew)",
			csr.CreationTimestamp.UTC().Format(time.RFC3339), notBefore.UTC().Format(time.RFC3339), CSRClockSkew)
	}
	return nil
}

func inWindow(csr *certificatesv1.CertificateSigningRequest, notBefore time.Time) bool {
	return !notBefore.IsZero() && !csr.CreationTimestamp.Time.Before(notBefore.Add(-CSRClockSkew))
}

func validateClient(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, nodeName string, want Expectation, node *corev1.Node) error {
	if sans := describeSANs(req); len(sans) > 0 {
		return ruleErr(RuleClientSANs, "a client certificate must have no subject alternative names, the request has %s", strings.Join(sans, ", "))
	}
	if !sameUsages(csr.Spec.Usages, clientUsagesFull) && !sameUsages(csr.Spec.Usages, clientUsagesMin) {
		return ruleErr(RuleClientUsages, "usages %q are not exactly [digital signature, key encipherment, client auth] or [digital signature, client auth]", csr.Spec.Usages)
	}
	if want.Renewal {
		if err := checkRenewalRequester(csr, nodeName); err != nil {
			return err
		}
		if node == nil {
			return ruleErr(RuleNodeRegistered, "no Node %q is registered, so there is no client certificate to renew", nodeName)
		}
	} else {
		requesters := want.ClientRequesters
		if len(requesters) == 0 {
			requesters = []string{OpenShiftBootstrapper}
		}
		if !slices.Contains(requesters, csr.Spec.Username) {
			return ruleErr(RuleClientRequester, "requested by %q, not by the bootstrap identity (%s)", csr.Spec.Username, strings.Join(requesters, " or "))
		}
		if node != nil {
			return ruleErr(RuleNodeExists, "Node %q already exists, so this is not its first join", nodeName)
		}
	}
	if want.ClientCSR != "" && want.ClientCSR != csr.Name {
		return ruleErr(RuleClientOnce, "CSR %s is already this join's client certificate for node %q; a join gets one", want.ClientCSR, nodeName)
	}
	return nil
}

// checkRenewalRequester: a kubelet renews with its current certificate, so
// the request comes from the node itself.
func checkRenewalRequester(csr *certificatesv1.CertificateSigningRequest, nodeName string) error {
	if u := csr.Spec.Username; u != nodeUserPrefix+nodeName {
		return ruleErr(RuleClientRequester, "a renewal requested by %q, not by the node itself (%s%s)", u, nodeUserPrefix, nodeName)
	}
	if !slices.Contains(csr.Spec.Groups, nodesGroup) {
		return ruleErr(RuleClientRequester, "a renewal requested by %q outside group %q (groups %q)", csr.Spec.Username, nodesGroup, csr.Spec.Groups)
	}
	return nil
}

func validateServing(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, nodeName string, want Expectation, node *corev1.Node) error {
	if u := csr.Spec.Username; u != nodeUserPrefix+nodeName {
		return ruleErr(RuleServingRequester, "requested by %q, not by the node itself (%s%s)", u, nodeUserPrefix, nodeName)
	}
	for _, g := range []string{nodesGroup, authnGroup} {
		if !slices.Contains(csr.Spec.Groups, g) {
			return ruleErr(RuleServingGroups, "the requester's groups %q do not include %q", csr.Spec.Groups, g)
		}
	}
	if err := checkServingUsages(csr.Spec.Usages); err != nil {
		return err
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return ruleErr(RuleServingSANs, "a serving certificate must have no email or URI names, the request has %s", strings.Join(describeSANs(req), ", "))
	}
	if len(req.IPAddresses) == 0 && len(req.DNSNames) == 0 {
		return ruleErr(RuleServingSANs, "the request names no IP address or DNS name to serve")
	}
	if err := checkClusterNames(req.DNSNames, req.IPAddresses, want.Cluster); err != nil {
		return err
	}
	ips, names := instanceNames(want)
	if err := checkSANs(req, ips, names, RuleServingSANs, "the instance's", joinOrNone(want.Addresses), joinOrNone(want.Hostnames)); err != nil {
		return err
	}
	if node == nil {
		return ruleErr(RuleNodeRegistered, "no Node %q is registered yet; a serving certificate is for a registered node", nodeName)
	}
	// The instance's addresses are what wsu recorded; the Node's are what
	// the cluster already routes to under that name. A name already taken
	// by another host must not get a certificate for this host's
	// addresses, so both must agree (as cluster-machine-approver checks).
	nodeIPs, nodeNames, shown := nodeAddresses(node)
	return checkSANs(req, nodeIPs, nodeNames, RuleServingNodeSANs, "Node "+strconv.Quote(nodeName)+"'s", shown, shown)
}

func checkServingUsages(usages []certificatesv1.KeyUsage) error {
	if hasDuplicates(usages) {
		return ruleErr(RuleServingUsages, "usages %q repeat a usage", usages)
	}
	if !slices.Contains(usages, certificatesv1.UsageServerAuth) {
		return ruleErr(RuleServingUsages, "usages %q do not include server auth", usages)
	}
	for _, u := range usages {
		if !slices.Contains(servingAllowed, u) {
			return ruleErr(RuleServingUsages, "usage %q is not one of digital signature, key encipherment, server auth", u)
		}
	}
	return nil
}

// checkSANs holds every IP and DNS SAN to the given addresses and names.
func checkSANs(req *x509.CertificateRequest, ips []net.IP, names []string, rule, whose, shownIPs, shownNames string) error {
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return ruleErr(rule, "IP address %s is not one of %s addresses (%s)", ip, whose, shownIPs)
		}
	}
	for _, dns := range req.DNSNames {
		if !slices.Contains(names, normaliseDNS(dns)) {
			return ruleErr(rule, "DNS name %q is not one of %s host names (%s)", dns, whose, shownNames)
		}
	}
	return nil
}

// nodeAddresses splits a Node's status.addresses into IPs (InternalIP,
// ExternalIP) and normalised DNS names (Hostname, InternalDNS,
// ExternalDNS), and lists them for an error.
func nodeAddresses(node *corev1.Node) (ips []net.IP, names []string, shown string) {
	var all []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(strings.TrimSpace(a.Address)); ip != nil {
				ips = append(ips, ip)
			}
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			if n := normaliseDNS(a.Address); n != "" {
				names = append(names, n)
			}
		default:
			continue
		}
		all = append(all, string(a.Type)+"="+a.Address)
	}
	return ips, names, joinOrNone(limitList(all))
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
	return strings.Join(limitList(s), ", ")
}

// maxListed bounds how many names an error lists: a request may carry
// thousands, and the error ends up in a warning.
const maxListed = 8

// limitList keeps the first maxListed entries and says how many more.
func limitList(s []string) []string {
	if len(s) <= maxListed {
		return s
	}
	return append(slices.Clone(s[:maxListed]), fmt.Sprintf("and %d more", len(s)-maxListed))
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
	return limitList(out)
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
