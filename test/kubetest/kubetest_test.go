package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestCacheKey(t *testing.T) {
	src, err := sourceDir()
	require.NoError(t, err)
	// A copy of the wrapper sources to change one file at a time.
	cp := t.TempDir()
	for _, w := range wrappers {
		require.NoError(t, os.MkdirAll(filepath.Join(cp, w.name), 0o755))
		for _, f := range []string{"go.mod", "go.sum", "main.go"} {
			b, err := os.ReadFile(filepath.Join(src, w.name, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(cp, w.name, f), b, 0o644))
		}
	}
	keys := func(dir, goVers string) map[string]string {
		m := map[string]string{}
		for _, w := range wrappers {
			k, err := binaryKey(dir, w.name, goVers)
			require.NoError(t, err)
			m[w.name] = k
		}
		return m
	}
	base := keys(cp, "go1.26.8")
	assert.Equal(t, base, keys(src, "go1.26.8"), "the keys depend on content, not location")
	for name, k := range base {
		assert.Len(t, k, 64, name)
	}

	t.Run("go version changes every key", func(t *testing.T) {
		for name, k := range keys(cp, "go1.26.9") {
			assert.NotEqual(t, base[name], k, name)
		}
	})
	for _, w := range wrappers {
		for _, f := range []string{"go.mod", "go.sum", "main.go"} {
			t.Run(w.name+"/"+f+" changes only its own key", func(t *testing.T) {
				p := filepath.Join(cp, w.name, f)
				old, err := os.ReadFile(p)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(p, append(old, "\n// changed\n"...), 0o644))
				t.Cleanup(func() { os.WriteFile(p, old, 0o644) })
				for name, k := range keys(cp, "go1.26.8") {
					if name == w.name {
						assert.NotEqual(t, base[name], k, name)
					} else {
						assert.Equal(t, base[name], k, name)
					}
				}
			})
		}
	}
}

func TestLegacyCacheAdopted(t *testing.T) {
	src, err := sourceDir()
	require.NoError(t, err)
	root := t.TempDir()
	key, err := legacyKey(src, "go1.26.8")
	require.NoError(t, err)
	// The first layout: etcd and kube-apiserver together under one key.
	require.NoError(t, os.MkdirAll(filepath.Join(root, key), 0o755))
	for _, name := range legacyPair {
		require.NoError(t, os.WriteFile(filepath.Join(root, key, name), []byte("old "+name), 0o755))
	}
	b := &builder{src: src, goVersion: "go1.26.8", root: root, logf: t.Logf}
	for _, name := range legacyPair {
		out := filepath.Join(t.TempDir(), name)
		require.True(t, b.adoptLegacy(name, out), name)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Equal(t, "old "+name, string(got))
	}
	assert.False(t, b.adoptLegacy(KubeControllerManager, filepath.Join(t.TempDir(), "kcm")), "no legacy build of kube-controller-manager")
	other := &builder{src: src, goVersion: "go1.26.9", root: root, logf: t.Logf}
	assert.False(t, other.adoptLegacy(Etcd, filepath.Join(t.TempDir(), "etcd")), "another Go version's build is not reused")
}

func TestKubeVersionFlags(t *testing.T) {
	flags := strings.Join(kubeVersionFlags("v1.37.1"), " ")
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.37.1",
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=37",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.37.1",
	} {
		assert.Contains(t, flags, want)
	}
}

func TestLockFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := lockFile(ctx, path, func() { t.Error("first lock waited") })
	require.NoError(t, err)

	var waited atomic.Bool
	got := make(chan func(), 1)
	go func() {
		u, err := lockFile(ctx, path, func() { waited.Store(true) })
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	require.Eventually(t, waited.Load, 5*time.Second, 10*time.Millisecond, "the second locker reports waiting")
	select {
	case <-got:
		t.Fatal("second lock taken while the first is held")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(5 * time.Second):
		t.Fatal("second lock not taken after the first was released")
	}

	// A cancelled wait gives up.
	unlock, err = lockFile(ctx, path, func() {})
	require.NoError(t, err)
	defer unlock()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = lockFile(cctx, path, func() {})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func newCSR(t *testing.T, cn string, org ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: org},
	}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestCluster checks the test bed itself: a real API server whose absent
// parts the helpers play.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := Start(t)
	t.Logf("started in %s", time.Since(start))
	ctx := context.Background()

	t.Run("version", func(t *testing.T) {
		v, err := c.Client.Discovery().ServerVersion()
		require.NoError(t, err)
		assert.Regexp(t, `^v1\.\d+\.\d+$`, v.GitVersion, "kube-apiserver is version-stamped")
	})

	t.Run("kubeconfig file", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err)
	})

	t.Run("node helpers and watch", func(t *testing.T) {
		// A raw watch is what etcd 3.4 broke; it must see the kubelet's
		// and the OVN master's updates.
		w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=win-1"})
		require.NoError(t, err)
		defer w.Stop()

		_, err = c.CreateNode(ctx, "win-1", map[string]string{"kubernetes.io/os": "windows"})
		require.NoError(t, err)
		require.NoError(t, c.SetNodeReady(ctx, "win-1"))
		require.NoError(t, c.AnnotateNode(ctx, "win-1", "k8s.ovn.org/hybrid-overlay-node-subnet", "10.132.0.0/24"))

		var last *corev1.Node
		deadline := time.After(10 * time.Second)
		for last == nil || last.Annotations["k8s.ovn.org/hybrid-overlay-node-subnet"] == "" {
			select {
			case ev := <-w.ResultChan():
				require.NotEqual(t, watch.Error, ev.Type, "watch error: %v", ev.Object)
				last = ev.Object.(*corev1.Node)
			case <-deadline:
				t.Fatal("watch saw no annotation")
			}
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "win-1", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, n.Status.Conditions, 1)
		assert.Equal(t, corev1.ConditionTrue, n.Status.Conditions[0].Status)
		assert.Equal(t, "windows", n.Labels["kubernetes.io/os"])
	})

	t.Run("pod running", func(t *testing.T) {
		require.NoError(t, c.EnsureNamespace(ctx, "kubetest"))
		_, err := c.Client.CoreV1().Pods("kubetest").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec:       corev1.PodSpec{NodeName: "win-1", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, c.SetPodRunning(ctx, "kubetest", "p"))
		p, err := c.Client.CoreV1().Pods("kubetest").Get(ctx, "p", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	})

	t.Run("sign CSR", func(t *testing.T) {
		csrs := c.Client.CertificatesV1().CertificateSigningRequests()
		csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "node-csr-1"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    newCSR(t, "system:node:win-1", "system:nodes"),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		_, err = c.SignCSR(ctx, csr.Name)
		require.ErrorContains(t, err, "not approved", "a signer only signs approved CSRs")

		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test"})
		_, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		require.NoError(t, err)
		certPEM, err := c.SignCSR(ctx, csr.Name)
		require.NoError(t, err)

		got, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, certPEM, got.Status.Certificate)
		block, _ := pem.Decode(certPEM)
		require.NotNil(t, block)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		assert.Equal(t, "system:node:win-1", cert.Subject.CommonName)
		assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(c.SignerCA()))
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err)
	})

	t.Run("user without a role", func(t *testing.T) {
		kc, err := c.User("nobody")
		require.NoError(t, err)
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "want forbidden, got %v", err)
	})
}
