package v1alpha1

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDHostVarsRule: the CRD's rule on spec.hostVars (the API server's
// half of the trust boundary) allows exactly InstanceHostVars (the
// controller's half), in its rule and in its message. A change to one without the other (or without make generate)
// fails here.
func TestCRDHostVarsRule(t *testing.T) {
	data, err := os.ReadFile("../../deploy/crd/wsu.dev_windowsinstances.yaml")
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	require.Len(t, crd.Spec.Versions, 1)
	hv := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["hostVars"]
	require.Len(t, hv.XValidations, 1)
	names := func(list string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(list, -1) {
			out = append(out, m[1])
		}
		return out
	}
	inList := regexp.MustCompile(`in \[([^\]]*)\]`)
	rule := inList.FindStringSubmatch(hv.XValidations[0].Rule)
	require.NotNil(t, rule, hv.XValidations[0].Rule)
	assert.Equal(t, InstanceHostVars(), names(rule[1]), "the rule's list")
	msg := regexp.MustCompile(`only (.*) and proxy_jump;`).FindStringSubmatch(hv.XValidations[0].Message)
	require.NotNil(t, msg, hv.XValidations[0].Message)
	assert.Equal(t, InstanceHostVars(), append(strings.Split(msg[1], ", "), JumpHostVar), "the message's list")
}

// TestCRDVarsRule: the CRD's rule on spec.vars refuses exactly
// ControllerVars, in its rule and in its message.
func TestCRDVarsRule(t *testing.T) {
	data, err := os.ReadFile("../../deploy/crd/wsu.dev_windowsinstances.yaml")
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	v := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["vars"]
	require.Len(t, v.XValidations, 1)
	rule := regexp.MustCompile(`in \[([^\]]*)\]`).FindStringSubmatch(v.XValidations[0].Rule)
	require.NotNil(t, rule, v.XValidations[0].Rule)
	var names []string
	for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(rule[1], -1) {
		names = append(names, m[1])
	}
	assert.Equal(t, ControllerVars(), names, "the rule's list")
	for _, n := range ControllerVars() {
		assert.Contains(t, v.XValidations[0].Message, n, "the message names it")
	}
}
