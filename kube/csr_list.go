package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// CSRListMaxAge is how old a shared list of CSRs may be when a survey
// uses it: under k8s_csr_approve's default interval (2 s), so a host's next
// look always sees a newer list than its last.
const CSRListMaxAge = time.Second

// CSRList serves the CSR surveys of one run's pollers — every joining
// host's k8s_csr_approve looks at the CSRs every few seconds — from one
// shared list, so the work of a look does not grow with the fleet:
//   - a list younger than maxAge is reused, and concurrent callers wait for
//     the one request in flight instead of each listing: the API server is
//     asked at most once per maxAge however many hosts poll;
//   - whom a CSR concerns (its requester and the common name of its
//     request, CSRConcernsNode's test) is worked out once per CSR, by UID
//     (spec.request is immutable), and the list is indexed by node name,
//     so a survey touches only its node's CSRs.
//
// A caller names the moment the list must postdate (its previous look, or
// its start), so sharing never shows it an older world than it saw. The
// verdicts are Judge's, on exactly the CSRs CSRConcernsNode picks from the
// whole list. Approval does not use the shared list: ApproveCSR lists
// afresh and judges again before it approves.
type CSRList struct {
	kc     kubernetes.Interface
	maxAge time.Duration
	now    func() time.Time

	mu       sync.Mutex
	snap     *csrSnapshot           // the latest list, nil before the first or after Forget
	inflight chan struct{}          // closed when the list request in flight ends
	names    map[types.UID][]string // whom each listed CSR concerns, by UID
	parses   int                    // requests parsed so far (tests)

	clusterMu sync.Mutex
	cluster   *ClusterAddresses // the cluster's own addresses, read at clusterAt
	clusterAt time.Time
}

// clusterMaxAge is how long the cluster's own addresses are reused: they
// change when the control plane does, not between two looks of a join.
const clusterMaxAge = 30 * time.Second

// clusterAddresses reads the cluster's own addresses at most once per
// clusterMaxAge for every host of the run.
func (l *CSRList) clusterAddresses(ctx context.Context) (ClusterAddresses, error) {
	l.clusterMu.Lock()
	defer l.clusterMu.Unlock()
	if l.cluster != nil && l.now().Sub(l.clusterAt) < clusterMaxAge {
		return *l.cluster, nil
	}
	at := l.now()
	c, err := ReadClusterAddresses(ctx, l.kc)
	if err != nil {
		return c, err
	}
	l.cluster, l.clusterAt = &c, at
	return c, nil
}

// csrSnapshot is one list and its index.
type csrSnapshot struct {
	at     time.Time // when its request was sent
	items  []certificatesv1.CertificateSigningRequest
	byNode map[string][]int // node name → indices into items
}

// NewCSRList returns an empty shared list reading through kc.
func NewCSRList(kc kubernetes.Interface) *CSRList {
	return &CSRList{kc: kc, maxAge: CSRListMaxAge, now: time.Now, names: map[types.UID][]string{}}
}

// NodeCSRs is the package's NodeCSRs answered from the shared list: the
// Node is read afresh; the CSRs were listed after since (so the caller sees
// every change made before then: its own approvals, what a test created)
// and at most maxAge ago.
func (l *CSRList) NodeCSRs(ctx context.Context, want Expectation, since time.Time) (NodeSurvey, error) {
	// Three reads of their own, each a round trip: at once.
	var (
		node                     *corev1.Node
		s                        *csrSnapshot
		wantErr, nodeErr, csrErr error
		wg                       sync.WaitGroup
	)
	name := want.NodeName
	wg.Go(func() { want, wantErr = withCluster(ctx, want, l.clusterAddresses) })
	wg.Go(func() { node, nodeErr = GetNode(ctx, l.kc, name) })
	wg.Go(func() { s, csrErr = l.snapshot(ctx, since) })
	wg.Wait()
	switch {
	case wantErr != nil:
		return NodeSurvey{Want: want}, wantErr
	case nodeErr != nil:
		return NodeSurvey{Want: want}, nodeErr
	case csrErr != nil:
		return NodeSurvey{Want: want, Node: node}, fmt.Errorf("listing CertificateSigningRequests: %w", csrErr)
	}
	csrs, want := Judge(s.forNode(want.NodeName), want, node)
	return NodeSurvey{Want: want, Node: node, CSRs: csrs}, nil
}

// snapshot returns a list younger than maxAge and requested after since,
// listing if there is none and no request is in flight, else waiting for
// the one in flight.
func (l *CSRList) snapshot(ctx context.Context, since time.Time) (*csrSnapshot, error) {
	l.mu.Lock()
	for {
		if s := l.snap; s != nil && l.now().Sub(s.at) < l.maxAge && s.at.After(since) {
			l.mu.Unlock()
			return s, nil
		}
		if l.inflight == nil {
			break
		}
		ch := l.inflight
		l.mu.Unlock()
		select {
		case <-ch: // look again: it may have failed, or be stale already
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
	ch := make(chan struct{})
	l.inflight = ch
	l.mu.Unlock()

	at := l.now()
	list, err := l.kc.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})

	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight = nil
	close(ch)
	if err != nil {
		return nil, err
	}
	l.snap = l.index(list.Items, at)
	return l.snap, nil
}

// index builds the node-name index of items, reusing what is known of
// CSRs listed before; names of CSRs no longer listed are dropped.
// l.mu is held.
func (l *CSRList) index(items []certificatesv1.CertificateSigningRequest, at time.Time) *csrSnapshot {
	s := &csrSnapshot{at: at, items: items, byNode: map[string][]int{}}
	names := make(map[types.UID][]string, len(items))
	for i := range items {
		csr := &items[i]
		ns, ok := l.names[csr.UID]
		if !ok || csr.UID == "" {
			ns = concernedNames(csr)
			l.parses++
		}
		if csr.UID != "" {
			names[csr.UID] = ns
		}
		for _, n := range ns {
			s.byNode[n] = append(s.byNode[n], i)
		}
	}
	l.names = names
	return s
}

// forNode copies out the CSRs that may concern node (CSRConcernsNode,
// which Judge applies, has the last word).
func (s *csrSnapshot) forNode(node string) []certificatesv1.CertificateSigningRequest {
	node = strings.ToLower(node)
	if node == "" {
		return nil
	}
	idx := s.byNode[node]
	out := make([]certificatesv1.CertificateSigningRequest, len(idx))
	for i, j := range idx {
		out[i] = s.items[j]
	}
	return out
}

// concernedNames lists every node name CSRConcernsNode would say the CSR
// concerns: the requester's, if it is a node identity; the request's
// common name, and each part of it after a colon. Each name once.
func concernedNames(csr *certificatesv1.CertificateSigningRequest) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if u, ok := strings.CutPrefix(csr.Spec.Username, nodeUserPrefix); ok {
		add(u)
	}
	if req, err := parseRequest(csr); err == nil {
		cn := req.Subject.CommonName
		add(cn)
		for i := range len(cn) {
			if cn[i] == ':' {
				add(cn[i+1:])
			}
		}
	}
	return out
}
