//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wsu-project/wsu/agent/platform/sim"
	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/harness"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

const adminKeys = `C:\ProgramData\ssh\administrators_authorized_keys`

// TestKeyRotation: two joined instances; the admin adds a new key to the
// key Secret as private-key.pem.new. The Secret watch wakes both (the
// drift interval and payload check are an hour, so nothing else would
// plan them), each runs rotate-key logged in with the old key, one at a
// time: afterwards each host's sshd — which reads the host's own
// administrators_authorized_keys — refuses the old key and accepts the
// new, the KeyRotated condition went from KeyRotationPending to
// KeyRotated, status records the new key's fingerprint, and no instance
// was joined again (no join apply, the same Nodes).
//
// Then the admin swaps the keys (the new one as private-key.pem) and adds
// a third as .new while the second host is down: the first host moves to
// it; the second shows KeyRotated=False, reason Unreachable, and keeps the
// second key recorded (it is logged into with it) until it comes back,
// when it is rotated too.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	b := newBed(t, 2)
	ctx := context.Background()
	old, err := os.ReadFile(b.env.KeyFile)
	require.NoError(t, err)
	sshds := map[string]*sshdtest.Server{}
	for _, h := range b.env.Hosts {
		sshds[h.Name] = b.ownSSHD(t, h, old)
	}
	c := b.startController(t, controller.Options{PayloadCheck: time.Hour}, controller.ManagerOptions{}, nil)
	for _, h := range b.env.Hosts {
		wi := b.instance(t, h, wsuv1.ApprovalAuto)
		wi.Spec.HostVars["ansible_port"] = fmt.Sprint(sshds[h.Name].Port)
		require.NoError(t, b.client.Create(ctx, wi))
	}
	oldFP := fingerprintOf(t, old)
	nodeUIDs := map[string]types.UID{}
	for _, h := range b.env.Hosts {
		b.waitJoined(t, h.Name)
		wi := b.get(t, h.Name)
		assert.Equal(t, oldFP, wi.Status.Identity.KeyFingerprint, "the key in use is recorded")
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
		require.NotNil(t, c, describe(wi))
		assert.Equal(t, controller.ReasonKeyInUse, c.Reason)
		node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		nodeUIDs[h.Name] = node.UID
	}
	_, ended := c.runs.record()
	joinRuns := len(ended)

	second := readKey(t, sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{}))
	secondFP := fingerprintOf(t, second)
	track := b.trackKeyRotated(t)
	b.setKeys(t, old, second)
	for _, h := range b.env.Hosts {
		b.waitKey(t, h.Name, secondFP, controller.ReasonKeyRotated)
	}
	for _, h := range b.env.Hosts {
		assert.Error(t, login(sshds[h.Name], b.env.SSHUser, old), "%s: sshd refuses the old key", h.Name)
		assert.NoError(t, login(sshds[h.Name], b.env.SSHUser, second), "%s: sshd accepts the new key", h.Name)
		assert.Equal(t, string(gossh.MarshalAuthorizedKey(publicOf(t, second))), b.authorizedKeys(t, h), "%s: only the new key is authorised", h.Name)
		assert.Equal(t, []string{controller.ReasonKeyRotationNeeded, controller.ReasonKeyRotated}, track.reasons(h.Name),
			"%s: KeyRotated said pending, then done", h.Name)
		b.waitEventMatching(t, h.Name, controller.ReasonKeyRotated, secondFP)
	}

	// The second host goes down; the admin swaps the keys and adds a third.
	down, up := b.env.Hosts[1], b.env.Hosts[0]
	sshds[down.Name].Stop()
	third := readKey(t, sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{}))
	thirdFP := fingerprintOf(t, third)
	b.setKeys(t, second, third)
	b.waitKey(t, up.Name, thirdFP, controller.ReasonKeyRotated)
	assert.NoError(t, login(sshds[up.Name], b.env.SSHUser, third))
	assert.Error(t, login(sshds[up.Name], b.env.SSHUser, second))
	eventually(t, 2*time.Minute, down.Name+" says it could not be rotated", func() (bool, string) {
		wi := b.get(t, down.Name)
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonUnreachable &&
			strings.Contains(c.Message, thirdFP), describe(wi)
	})
	wi := b.get(t, down.Name)
	assert.Equal(t, secondFP, wi.Status.Identity.KeyFingerprint, "an unrotated host keeps its key")
	assert.NotZero(t, wi.Status.Failures, "and backs off")

	sshds[down.Name].Restart(t)
	b.waitKey(t, down.Name, thirdFP, controller.ReasonKeyRotated)
	assert.NoError(t, login(sshds[down.Name], b.env.SSHUser, third))
	assert.Error(t, login(sshds[down.Name], b.env.SSHUser, second))
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(publicOf(t, third))), b.authorizedKeys(t, down))
	eventually(t, 2*time.Minute, down.Name+" back in service", func() (bool, string) {
		wi := b.get(t, down.Name)
		return wi.Status.Phase == wsuv1.PhaseJoined && !meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionDegraded), describe(wi)
	})

	// Nobody was joined again.
	_, ended = c.runs.record()
	for _, r := range ended[joinRuns:] {
		assert.False(t, r.mode == engine.ModeApply && r.playbook != "wsu:rotate-key.hcl",
			"after the join, only rotate-key applied: %s applied %s", r.instance, r.playbook)
	}
	for _, h := range b.env.Hosts {
		node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, nodeUIDs[h.Name], node.UID, "%s: the same Node", h.Name)
	}
}

// ownSSHD gives h an sshd of its own that reads the host's
// administrators_authorized_keys, seeded with key's public key, so what
// rotate-key writes there decides who may log in.
func (b *bed) ownSSHD(t *testing.T, h *harness.Host, key []byte) *sshdtest.Server {
	t.Helper()
	ctx := context.Background()
	var file string
	require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
		if err := s.MkdirAll(ctx, `C:\ProgramData\ssh`, 0o755); err != nil {
			return err
		}
		if err := s.WriteFile(ctx, adminKeys, strings.NewReader(string(gossh.MarshalAuthorizedKey(publicOf(t, key)))), 0o644); err != nil {
			return err
		}
		var err error
		file, err = s.LocalPath(adminKeys)
		return err
	}))
	return sshdtest.StartWith(t, sshdtest.Options{AuthorizedKeysFile: file})
}

func (b *bed) authorizedKeys(t *testing.T, h *harness.Host) string {
	t.Helper()
	var data []byte
	require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
		var err error
		data, err = s.ReadFile(context.Background(), adminKeys, 1<<20)
		return err
	}))
	return string(data)
}

// setKeys makes the key Secret hold current as private-key.pem and next
// as private-key.pem.new.
func (b *bed) setKeys(t *testing.T, current, next []byte) {
	t.Helper()
	sec := &corev1.Secret{}
	require.NoError(t, b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: kubeinv.KeySecret}, sec))
	sec.Data = map[string][]byte{kubeinv.KeySecretKey: current, kubeinv.NewKeySecretKey: next}
	require.NoError(t, b.client.Update(context.Background(), sec))
}

// waitKey waits until name records the key fp with KeyRotated=True for
// reason.
func (b *bed) waitKey(t *testing.T, name, fp, reason string) {
	t.Helper()
	eventually(t, 5*time.Minute, name+" moved to "+fp, func() (bool, string) {
		wi := b.get(t, name)
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
		return wi.Status.Identity.KeyFingerprint == fp && c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason,
			wi.Status.Identity.KeyFingerprint + " " + describe(wi)
	})
}

// login reports whether srv lets key in as user.
func login(srv *sshdtest.Server, user string, key []byte) error {
	signer, err := gossh.ParsePrivateKey(key)
	if err != nil {
		return err
	}
	c, err := gossh.Dial("tcp", srv.Addr, &gossh.ClientConfig{
		User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, Timeout: 10 * time.Second,
		HostKeyCallback: func(_ string, _ net.Addr, key gossh.PublicKey) error {
			for _, k := range srv.HostKeys {
				if string(k.Marshal()) == string(key.Marshal()) {
					return nil
				}
			}
			return fmt.Errorf("not the test sshd's host key")
		}})
	if err != nil {
		return err
	}
	return c.Close()
}

func readKey(t *testing.T, k sshdtest.Key) []byte {
	t.Helper()
	data, err := os.ReadFile(k.File)
	require.NoError(t, err)
	return data
}

func publicOf(t *testing.T, key []byte) gossh.PublicKey {
	t.Helper()
	s, err := gossh.ParsePrivateKey(key)
	require.NoError(t, err)
	return s.PublicKey()
}

func fingerprintOf(t *testing.T, key []byte) string {
	return gossh.FingerprintSHA256(publicOf(t, key))
}

// keyRotatedTracker follows the KeyRotated condition of every instance in
// the order the API server changed it, keeping each reason once per
// change.
type keyRotatedTracker struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (b *bed) trackKeyRotated(t *testing.T) *keyRotatedTracker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := b.client.Watch(ctx, &wsuv1.WindowsInstanceList{}, client.InNamespace(ns))
	require.NoError(t, err)
	k := &keyRotatedTracker{seen: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			wi, ok := ev.Object.(*wsuv1.WindowsInstance)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
			if c == nil {
				continue
			}
			k.mu.Lock()
			if r := k.seen[wi.Name]; len(r) == 0 || r[len(r)-1] != c.Reason {
				k.seen[wi.Name] = append(r, c.Reason)
			}
			k.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return k
}

// reasons are name's KeyRotated reasons since the tracker started, after
// the one it had then.
func (k *keyRotatedTracker) reasons(name string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.seen[name]
	if len(r) > 0 && r[0] == controller.ReasonKeyInUse {
		r = r[1:]
	}
	return append([]string(nil), r...)
}
