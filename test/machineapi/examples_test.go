//go:build linux

package machineapi_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/machineapi"
	"github.com/wsu-project/wsu/userdata"
)

// exampleClouds are the platforms docs/install.md gives a MachineSet for,
// one file each in examples/machinesets.
var exampleClouds = []string{"aws", "azure", "gcp", "vsphere", "nutanix"}

// TestExampleMachineSets: each example MachineSet of docs/install.md
// (examples/machinesets) is created, server-side dry run with strict field
// validation, against the Machine API's real CRDs on a real API server, so
// an example the Machine API would refuse fails here; each is a Windows
// MachineSet wsu takes (its template labelled machine.openshift.io/os-id:
// Windows, its selector matching its template) whose providerSpec's user
// data is windows-user-data; and docs/install.md links each.
func TestExampleMachineSets(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallMachineAPI(ctx))
	require.NoError(t, cluster.EnsureNamespace(ctx, machineapi.Namespace))
	c, err := client.New(cluster.Config, client.Options{Scheme: runtime.NewScheme()})
	require.NoError(t, err)
	install, err := os.ReadFile("../../docs/install.md")
	require.NoError(t, err)

	files, err := filepath.Glob("../../examples/machinesets/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(exampleClouds), "one example per cloud: %v", exampleClouds)
	for _, cloud := range exampleClouds {
		t.Run(cloud, func(t *testing.T) {
			path := "../../examples/machinesets/" + cloud + ".yaml"
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			set := &unstructured.Unstructured{}
			require.NoError(t, yaml.Unmarshal(b, &set.Object))
			assert.Equal(t, machineapi.MachineSetGVK, set.GroupVersionKind())
			assert.Equal(t, machineapi.Namespace, set.GetNamespace())

			labels, _, _ := unstructured.NestedStringMap(set.Object, "spec", "template", "metadata", "labels")
			assert.Equal(t, "Windows", labels[machineapi.OSIDLabel], "a Windows MachineSet: wsu takes its Machines")
			selector, _, _ := unstructured.NestedStringMap(set.Object, "spec", "selector", "matchLabels")
			require.NotEmpty(t, selector)
			for k, v := range selector {
				assert.Equal(t, v, labels[k], "the selector matches the template's label %s", k)
			}
			userData, _, _ := unstructured.NestedString(set.Object, "spec", "template", "spec", "providerSpec", "value", "userDataSecret", "name")
			assert.Equal(t, userdata.SecretName, userData, "the Machines run wsu's user data")

			err = c.Create(ctx, set, client.DryRunAll, client.FieldValidation("Strict"))
			require.NoError(t, err, "the Machine API's CRD accepts the example")
			assert.Contains(t, string(install), "examples/machinesets/"+cloud+".yaml", "docs/install.md links it")
		})
	}
}
