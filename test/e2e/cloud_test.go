//go:build linux

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/standin/metadata"
)

// TestCloudNodeNames: with an external cloud provider the kubelet registers
// the name the cloud controller looks the instance up by. On AWS that is
// the instance metadata service's local-hostname, read on the node through
// IMDSv2 (here from the stand-in metadata service on 127.0.0.1, which the
// simulated hosts share); on vSphere the FQDN, lower-cased (the hosts'
// primary DNS suffix makes it differ from the host name).
func TestCloudNodeNames(t *testing.T) {
	const awsName = "ip-10-0-1-17.ec2.internal"
	md := metadata.Start(metadata.Options{AWSHostname: awsName, TokenRequired: true})
	defer md.Close()
	env := start(t, harness.Options{Hosts: 2, DNSSuffix: "Corp.Example.COM"})
	onAWS, onVSphere := env.Hosts[0], env.Hosts[1]
	awsVars := []string{"--limit", onAWS.Name, "-var", "platform=AWS", "-var", "instance_metadata_url=" + md.URL}

	t.Run("AWS", func(t *testing.T) {
		plan := run(t, env, nil, append([]string{"plan", "join", "--detailed-exitcode"}, awsVars...)...)
		require.Equalf(t, 2, plan.ExitCode, "plan on AWS\n%s", plan.Failures())
		assert.Contains(t, plan.Stdout, "node name "+awsName+" (AWS instance metadata, "+md.URL+"/latest/meta-data/local-hostname, IMDSv2)",
			"the plan shows the name the node will register")
		assert.NotContains(t, plan.Stdout+plan.Stderr, "stand-in-token", "the IMDSv2 token is never shown")

		requireSuccess(t, run(t, env, nil, append([]string{"apply", "join"}, awsVars...)...))
		node := registered(t, env, awsName)
		assert.Contains(t, node.Spec.Taints, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			"--cloud-provider=external: the cloud controller initialises the node it finds by that name")
		assert.Contains(t, md.Requests(), "GET /latest/meta-data/local-hostname token", "read with an IMDSv2 token")
		upgradeFindsNode(t, env, awsVars)

		requireSuccess(t, run(t, env, nil, append([]string{"apply", "remove"}, awsVars...)...))
		_, err := env.Cluster.Client.CoreV1().Nodes().Get(context.Background(), awsName, metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "remove finds the Node by the metadata name: %v", err)
	})

	t.Run("VSphere", func(t *testing.T) {
		require.NotEqual(t, onVSphere.Hostname, onVSphere.FQDN)
		vars := []string{"--limit", onVSphere.Name, "-var", "platform=VSphere"}
		requireSuccess(t, run(t, env, nil, append([]string{"apply", "join"}, vars...)...))
		registered(t, env, "win-02.corp.example.com")
		upgradeFindsNode(t, env, vars)
		requireSuccess(t, run(t, env, nil, append([]string{"apply", "remove"}, vars...)...))
		_, err := env.Cluster.Client.CoreV1().Nodes().Get(context.Background(), "win-02.corp.example.com", metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "remove finds the Node by its FQDN: %v", err)
	})
}

// upgradeFindsNode: an upgrade to the payload the node already runs finds
// the Node by the same name (its version annotation is current), so it
// plans no cordon, drain or change at all.
func upgradeFindsNode(t *testing.T, env *harness.Env, vars []string) {
	t.Helper()
	plan := run(t, env, nil, append([]string{"plan", "upgrade", "--detailed-exitcode"}, vars...)...)
	assert.Equalf(t, 0, plan.ExitCode, "plan upgrade of a current node: no change\n%s\n%s", plan.Failures(), tail(plan.Stdout, 12))
}

// registered: the Node exists under name, the kubelet was told that name,
// and no Node carries the host name instead.
func registered(t *testing.T, env *harness.Env, name string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the Node registers as %s", name)
	var h *harness.Host
	for _, x := range env.Hosts {
		if node.Status.Addresses != nil && hasAddress(node, x.IPv4) {
			h = x
		}
	}
	require.NotNil(t, h, "the Node's address is one of the hosts'")
	_, err = env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Node under the host name %s", h.NodeName)
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		info, err := s.QueryService(ctx, "kubelet")
		require.NoError(t, err)
		assert.Contains(t, info.Config.Args, "--hostname-override="+name)
		assert.Contains(t, info.Config.Args, "--cloud-provider=external")
		return nil
	}))
	return node
}

func hasAddress(n *corev1.Node, ip string) bool {
	for _, a := range n.Status.Addresses {
		if a.Address == ip {
			return true
		}
	}
	return false
}
