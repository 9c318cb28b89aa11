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
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wsu-project/wsu/agent/platform/sim"
	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/test/kubetest"
)

const kubeletCAPath = `C:\k\kubelet-ca.crt`

// TestClusterCAPushed: the kubelet's client CA of a kubeadm cluster is the
// cluster CA in kube-public/cluster-info. A joined instance whose drift
// pass is an hour away gets a changed CA at once: the ConfigMap's change
// plans it (the plan records the settings' new version) and, Automatic,
// applies it, so the node's kubelet-ca.crt holds the new bundle, with a
// ClusterSettingsChanged event; no drift is reported (driftPolicy Report
// does not hold a push back). Made Manual, the next change stops at
// AwaitingApproval with the node untouched and the plan's text (what an
// approver reviews) naming the file; approving its hash applies it.
func TestClusterCAPushed(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
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
		wi := b.get(t, h.Name)
		assert.NotEqual(t, before.Status.LastPlan.ClusterSettings, wi.Status.LastPlan.ClusterSettings, "the plan saw the new settings")
		assert.Equal(t, wi.Status.LastPlan.ClusterSettings, wi.Status.ClusterSettings, "the host is in line with them")
		assert.Equal(t, applies+1, countApplies(ctl.runs, h.Name), "one apply: the push")
		assert.False(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionDrifted), "a push is not drift: %s", describe(wi))
		b.waitEvent(t, h.Name, controller.ReasonSettingsChanged)
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
		require.NoError(t, b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.PlanConfigMapName(h.Name)}, cm))
		assert.Contains(t, cm.Data["plan.txt"], "kubelet-ca.crt", "the plan's text shows the file an approver reviews")

		require.NoError(t, controller.Approve(ctx, b.client, client.ObjectKey{Namespace: ns, Name: h.Name}, hash))
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
