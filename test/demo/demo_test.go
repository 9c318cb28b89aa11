//go:build linux

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/test/harness"
)

// TestControllerDemo runs `make demo-controller`'s demo and checks its key
// lines: the manifests applied with kubectl, the instance awaiting
// approval in the kubectl watch, the plan approved with wsu approve, the
// instance Joined with its Node Ready, and the removal, after which the
// host is as before the join. The demo fails
// when a step does not happen within its deadline, and so does this test.
func TestControllerDemo(t *testing.T) {
	root, err := harness.ModuleRoot()
	require.NoError(t, err)
	wsu := filepath.Join(t.TempDir(), "wsu")
	require.NoError(t, harness.BuildWSU(context.Background(), wsu))
	require.NoError(t, harness.BuildWSUController(context.Background(), wsu), "wsu controller runs it")
	var out bytes.Buffer
	err = runControllerDemo(wsu, filepath.Join(root, "deploy", "rendered", "kubernetes.yaml"), harness.NetworkOVNHybrid, false, &out)
	text := out.String()
	require.NoError(t, err, "the demo failed; its output:\n%s", text)
	for _, line := range []string{
		`(?m)^\s+deployment\.apps/wsu-controller created$`,
		`(?m)^\s+customresourcedefinition\.apiextensions\.k8s\.io/windowsinstances\.wsu\.dev created$`,
		`the Deployment wsu-controller gets no pod here`,
		`(?m)^\s+started: wsu controller, pid \d+`,
		`(?m)^\s+configmap/windows-instances created$`,
		`(?m)^\s+watch \| win-01\s+win-01\s+AwaitingApproval\s`,
		`(?m)^\s+Plan [0-9a-f]+ of wsu-system/win-01 \(wsu:join\.hcl, .*\): \d+ to add`,
		`(?m)^\s+Approved plan [0-9a-f]+ of wsu-system/win-01\.$`,
		`(?m)^\s+watch \| win-01\s+win-01\s+win-01\s+Joined\s+True\s`,
		`(?m)^\s+instance win-01 joined: Node win-01 Ready$`,
		`(?m)^\s+node/win-01\s+Ready\s`,
		`(?m)^\s+watch \| win-01\s+win-01\s+win-01\s+Removing\s`,
		`(?m)^\s+instance win-01 removed: the host deconfigured, Node win-01 deleted$`,
		`(?m)^\s+the host is as before the join: every file, service, registry value, HNS network and firewall rule$`,
		`(?m)^\s+stopped wsu controller \(pid \d+\)$`,
	} {
		assert.Regexp(t, regexp.MustCompile(line), text)
	}
	if t.Failed() {
		t.Logf("the demo's output:\n%s", text)
	}
}
