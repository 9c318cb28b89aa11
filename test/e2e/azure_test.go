//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/payloadtest"
)

const uninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// TestAzureCloudNodeManager: on Azure join runs cloud-node-manager (the
// stand-in) with WMCO's arguments and an identity of its own; with only the
// kubeconfig wsu wrote it removes the Node's uninitialized taint, and that
// identity cannot write another Node. A re-run changes nothing; remove
// takes the service, the files and the RBAC away.
func TestAzureCloudNodeManager(t *testing.T) {
	ctx := context.Background()
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	vars := []string{"-var", "platform=Azure"}
	admin := env.Cluster.Client
	const sa, role = "wsu-cloud-node-manager-", "wsu:cloud-node-manager:"

	requireSuccess(t, run(t, env, nil, append([]string{"apply", "join"}, vars...)...))
	// join waited for the stand-in to initialise the Node.
	node, err := admin.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitialized }), "taint removed: %v", node.Spec.Taints)
	assert.NotContains(t, node.Spec.Taints, corev1.Taint{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule}, "kubeadm: no OpenShift taint")
	assert.True(t, slices.ContainsFunc(node.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return strings.Contains(f.Manager, "cloud-node-manager") && f.Operation == metav1.ManagedFieldsOperationUpdate
	}), "the update came from azure-cloud-node-manager.exe: %v", node.ManagedFields)

	var token []byte
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		info, err := s.QueryService(ctx, "cloud-node-manager")
		require.NoError(t, err)
		assert.Equal(t, host.ServiceRunning, info.State)
		assert.Equal(t, []string{"--windows-service", "--node-name=" + h.NodeName, "--wait-routes=false", `--kubeconfig=C:\k\cloud-node-manager\kubeconfig`}, info.Config.Args)
		token, err = s.ReadFile(ctx, `C:\k\cloud-node-manager\token`, 0)
		return err
	}))

	// The identity the stand-in used is the node's own ServiceAccount, and
	// RBAC refuses it another Node.
	cfg := rest.AnonymousClientConfig(env.Cluster.Config)
	cfg.BearerToken = strings.TrimSpace(string(token))
	own, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	who, err := own.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:kube-system:"+sa+h.NodeName, who.Status.UserInfo.Username)
	other := "not-" + h.NodeName
	_, err = admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})
	require.NoError(t, err)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"x": "y"}}})
	_, err = own.CoreV1().Nodes().Patch(ctx, other, types.MergePatchType, patch, metav1.PatchOptions{})
	assert.Truef(t, apierrors.IsForbidden(err), "another Node is refused: %v", err)
	require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, other, metav1.DeleteOptions{}))

	plan := run(t, env, nil, append([]string{"plan", "join", "--detailed-exitcode"}, vars...)...)
	assert.Equalf(t, 0, plan.ExitCode, "a re-run changes nothing\n%s\n%s", plan.Failures(), tail(plan.Stdout, 12))
	assert.NotContains(t, plan.Stdout+plan.Stderr, strings.TrimSpace(string(token)), "the token is never shown")
	upgradeFindsNode(t, env, vars)

	// An upgrade with a new azure-cloud-node-manager.exe replaces it with
	// the service stopped, starts it again, and leaves the kubelet be.
	pids := func() (cnm, kubelet int) {
		require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
			a, err := s.QueryService(ctx, "cloud-node-manager")
			require.NoError(t, err)
			b, err := s.QueryService(ctx, "kubelet")
			require.NoError(t, err)
			cnm, kubelet = a.PID, b.PID
			return nil
		}))
		return cnm, kubelet
	}
	cnmBefore, kubeletBefore := pids()
	_, err = env.BumpPayload(ctx, payloadtest.AzureCloudNodeManager, "v1.31.2-standin")
	require.NoError(t, err)
	requireSuccess(t, run(t, env, nil, append([]string{"apply", "upgrade"}, vars...)...))
	cnmAfter, kubeletAfter := pids()
	assert.NotEqual(t, cnmBefore, cnmAfter, "cloud-node-manager restarted on its new binary")
	assert.NotZero(t, cnmAfter, "and running")
	assert.Equal(t, kubeletBefore, kubeletAfter, "the kubelet was left running")

	requireSuccess(t, run(t, env, nil, append([]string{"apply", "remove"}, vars...)...))
	_, err = admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, sa+h.NodeName, metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "ServiceAccount removed: %v", err)
	_, err = admin.RbacV1().ClusterRoles().Get(ctx, role+h.NodeName, metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "ClusterRole removed: %v", err)
	_, err = admin.RbacV1().ClusterRoleBindings().Get(ctx, role+h.NodeName, metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "ClusterRoleBinding removed: %v", err)
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		info, err := s.QueryService(ctx, "cloud-node-manager")
		require.NoError(t, err)
		assert.False(t, info.Exists, "the service is gone")
		st, err := s.Stat(ctx, `C:\k\cloud-node-manager\token`)
		require.NoError(t, err)
		assert.False(t, st.Exists, "the token is gone")
		return nil
	}))
}
