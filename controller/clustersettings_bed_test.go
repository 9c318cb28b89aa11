//go:build linux

package controller_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wsu-project/wsu/agent/platform/sim"
	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/kubetest"
)

const kubeletCAPath = `C:\k\kubelet-ca.crt`

// TestClusterCAPushed: the kubelet's client CA of a kubeadm cluster is the
// cluster CA in kube-public/cluster-info. A joined instance whose drift
// pass is an hour away gets a changed CA at once: the ConfigMap's change
// plans it (the plan records the settings' new version) and, Automatic,
// applies it, so the node's kubelet-ca.crt holds the new bundle, with a
// ClusterSettingsChanged event; no drift is reported (driftPolicy Report
// does not hold a push back). A Proxy created (its stand-in CRD installed
// before the controller started) sets the node's HTTP_PROXY and NO_PROXY
// the same way. Made Manual, the next change stops at
// AwaitingApproval with the node untouched and the plan's text (what an
// approver reviews) naming the file; approving its hash applies it.
func TestClusterCAPushed(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	// The OpenShift config kinds (stand-in CRDs), before the controller
	// starts: it watches the kinds the cluster serves then.
	require.NoError(t, b.env.Cluster.InstallCRDFiles("../modules/kube/testdata/openshift-config-crds.yaml"))
	ctl := b.startController(t, controller.Options{}, controller.ManagerOptions{}, nil) // drift interval: an hour
	ctx := context.Background()
	h := b.env.Hosts[0]
	require.NoError(t, b.client.Create(ctx, b.instance(t, h, wsuv1.ApprovalAuto)))
	eventually(t, 5*time.Minute, "joined with a Ready Node", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.ClusterSettings != "" &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi)
	})
	nodeCA := func() string {
		t.Helper()
		var data []byte
		require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
			var err error
			data, err = s.ReadFile(ctx, kubeletCAPath, 1<<20)
			return err
		}))
		return string(data)
	}
	joinedCA := nodeCA()
	require.Contains(t, joinedCA, "BEGIN CERTIFICATE", "join wrote the cluster CA")

	t.Run("Automatic: pushed within one reconcile", func(t *testing.T) {
		before := b.get(t, h.Name)
		applies := countApplies(ctl.runs, h.Name)
		bundle := rotateClusterCA(t, b.env.Cluster)
		eventually(t, 3*time.Minute, "the node's kubelet CA is the new bundle", func() (bool, string) {
			return nodeCA() == bundle, describe(b.get(t, h.Name))
		})
		// The apply's status follows its last write on the host.
		eventually(t, time.Minute, "the push recorded: the host in line with the new settings", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.LastPlan.ClusterSettings != before.Status.LastPlan.ClusterSettings &&
				wi.Status.ClusterSettings == wi.Status.LastPlan.ClusterSettings, describe(wi)
		})
		wi := b.get(t, h.Name)
		assert.Equal(t, applies+1, countApplies(ctl.runs, h.Name), "one apply: the push")
		assert.False(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionDrifted), "a push is not drift: %s", describe(wi))
		b.waitEvent(t, h.Name, controller.ReasonSettingsChanged)
	})
	if t.Failed() {
		return
	}

	t.Run("the Proxy reaches the node's environment", func(t *testing.T) {
		dc, err := dynamic.NewForConfig(b.env.Cluster.Config)
		require.NoError(t, err)
		_, err = dc.Resource(schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "proxies"}).Create(ctx,
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": map[string]any{"name": "cluster"},
				"spec": map[string]any{"httpProxy": "http://proxy.local:3128", "noProxy": ".cluster.local"},
			}}, metav1.CreateOptions{})
		require.NoError(t, err)
		env := func(name string) string {
			var v string
			require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
				var err error
				v, _, err = s.EnvGet(ctx, name)
				return err
			}))
			return v
		}
		eventually(t, 3*time.Minute, "the node's machine environment has the cluster's proxy", func() (bool, string) {
			return env("HTTP_PROXY") == "http://proxy.local:3128" && env("NO_PROXY") == ".cluster.local", describe(b.get(t, h.Name))
		})
		eventually(t, 3*time.Minute, "joined again, in line with the settings", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.ClusterSettings == wi.Status.LastPlan.ClusterSettings &&
				meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi)
		})
	})
	if t.Failed() {
		return
	}

	t.Run("Manual: awaits approval with the diff", func(t *testing.T) {
		wi := b.get(t, h.Name)
		wi.Spec.Approval = wsuv1.ApprovalManual
		require.NoError(t, b.client.Update(ctx, wi))
		eventually(t, time.Minute, "the new spec planned, in sync", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi.Status.ObservedGeneration == wi.Generation && wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
		})
		was := nodeCA()
		bundle := rotateClusterCA(t, b.env.Cluster)
		var hash string
		eventually(t, 3*time.Minute, "the push awaits approval", func() (bool, string) {
			wi := b.get(t, h.Name)
			if wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil {
				hash = wi.Status.LastPlan.Hash
				return true, ""
			}
			return false, describe(wi)
		})
		assert.Equal(t, was, nodeCA(), "nothing applied before approval")
		cm := &corev1.ConfigMap{}
		require.NoError(t, b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: approval.PlanConfigMapName(h.Name)}, cm))
		assert.Contains(t, cm.Data["plan.txt"], "kubelet-ca.crt", "the plan's text shows the file an approver reviews")

		require.NoError(t, approval.Approve(ctx, b.client, client.ObjectKey{Namespace: ns, Name: h.Name}, hash))
		eventually(t, 3*time.Minute, "applied once approved", func() (bool, string) {
			return nodeCA() == bundle, describe(b.get(t, h.Name))
		})
	})
}

// countApplies counts the applies of the instance's playbook the bed's
// controller ran.
func countApplies(runs *recordingRunner, name string) int {
	n := 0
	_, ended := runs.record()
	for _, r := range ended {
		if r.instance == ns+"/"+name && r.mode == engine.ModeApply {
			n++
		}
	}
	return n
}

// rotateClusterCA adds a new CA to kube-public/cluster-info's kubeconfig
// (a rotation's first step: old and new trusted side by side, so the
// cluster still verifies) and returns the bundle.
func rotateClusterCA(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	ctx := context.Background()
	cms := c.Client.CoreV1().ConfigMaps(kubetest.ClusterInfoNamespace)
	cm, err := cms.Get(ctx, kubetest.ClusterInfoName, metav1.GetOptions{})
	require.NoError(t, err)
	cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	require.NoError(t, err)
	var bundle string
	for _, cl := range cfg.Clusters {
		cl.CertificateAuthorityData = append(cl.CertificateAuthorityData, newCAPEM(t)...)
		bundle = string(cl.CertificateAuthorityData)
	}
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	cm.Data["kubeconfig"] = string(out)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	return bundle
}

func newCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "rotated-ca-" + strings.ToLower(t.Name())},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestClusterSettingsWatch: each source of the cluster settings a cluster
// serves is watched, and its change plans a joined instance at once,
// though nothing else would wake it for an hour (no Node, drift and Node
// checks an hour away): the kubelet CA (kube-public/cluster-info), the
// Proxy, an ImageDigestMirrorSet, and the trusted CA bundle the cluster
// network operator injects into wsu-trusted-ca, and the pull secret (the
// mirrors' credentials); another ConfigMap or Secret plans nothing. The OpenShift kinds are the stand-in CRDs modules/kube's tests
// install.
func TestClusterSettingsWatch(t *testing.T) {
	t.Parallel()
	cluster, admin := escalationBed(t)
	ctx := context.Background()
	require.NoError(t, cluster.InitKubeadm(ctx))
	require.NoError(t, cluster.InstallCRDFiles("../modules/kube/testdata/openshift-config-crds.yaml"))
	runs := &inSyncRunner{}
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: runs, NodeReadyCheck: time.Hour})
	wi := instanceNamed("win-1", nil)
	require.NoError(t, admin.Create(ctx, wi))
	get := func() *wsuv1.WindowsInstance {
		cur := &wsuv1.WindowsInstance{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(wi), cur))
		return cur
	}
	eventually(t, time.Minute, "joined", func() (bool, string) {
		cur := get()
		return cur.Status.Phase == wsuv1.PhaseJoined && cur.Status.ClusterSettings != "", describe(cur)
	})
	dc, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	proxies := dc.Resource(schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "proxies"})
	idms := dc.Resource(schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "imagedigestmirrorsets"})

	// plansOnce makes a change and waits for the one plan it causes: the
	// settings' version the instance's plan saw changes.
	plansOnce := func(what string, change func()) {
		t.Helper()
		before, plans := get().Status.LastPlan.ClusterSettings, len(runs.all("win-1"))
		change()
		eventually(t, time.Minute, what+" plans the instance", func() (bool, string) {
			cur := get()
			return cur.Status.LastPlan.ClusterSettings != before && cur.Status.ClusterSettings == cur.Status.LastPlan.ClusterSettings, describe(cur)
		})
		assert.Equal(t, plans+1, len(runs.all("win-1")), "%s: one plan", what)
	}
	plansOnce("the kubelet CA", func() { rotateClusterCA(t, cluster) })
	plansOnce("the Proxy", func() {
		_, err := proxies.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": map[string]any{"name": "cluster"},
			"spec": map[string]any{"httpProxy": "http://proxy.local:3128", "trustedCA": map[string]any{"name": "user-ca-bundle"}},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	})
	plansOnce("an image mirror set", func() {
		_, err := idms.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": map[string]any{"name": "mirrors"},
			"spec": map[string]any{"imageDigestMirrors": []any{map[string]any{"source": "quay.io/x", "mirrors": []any{"mirror.local/x"}}}},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	})
	plansOnce("the trusted CA (after another ConfigMap, which counts for nothing)", func() {
		require.NoError(t, admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}, Data: map[string]string{"a": "b"}}))
		// The cluster network operator injecting the Proxy's trusted CA.
		require.NoError(t, admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.TrustedCAConfigMap, Namespace: ns},
			Data: map[string]string{"ca-bundle.crt": string(newCAPEM(t))}}))
	})
	plansOnce("the pull secret (after another Secret there, which counts for nothing)", func() {
		require.NoError(t, cluster.EnsureNamespace(ctx, kube.PullSecretNamespace))
		secrets := cluster.Client.CoreV1().Secrets(kube.PullSecretNamespace) // openshift-config is no site admin's
		_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"},
			Data: map[string][]byte{"a": []byte("b")}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: kube.PullSecretName},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"mirror.local":{"auth":"dTpw"}}}`)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	})
	assert.Zero(t, runs.applies("win-1"), "in sync: nothing to apply")
}
