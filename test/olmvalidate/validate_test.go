// Package olmvalidate runs the operator framework's own bundle validation
// (github.com/operator-framework/api: what `operator-sdk bundle validate`
// runs) on the checked-in OLM bundle, deploy/olm/bundle (make bundle). It
// is a module of its own so the operator framework's dependencies stay out
// of wsu's go.mod; make test runs it (cd test/olmvalidate && go test ./...).
package olmvalidate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bundleDir is the checked-in bundle, from this package's directory.
const bundleDir = "../../deploy/olm/bundle"

// k8sVersion is the bundle's minKubeVersion's minor: the removed-API
// checks run against it.
const k8sVersion = "1.33"

// validators are operator-sdk's default bundle validators (the CSV, its
// CRDs, the bundle as a whole) and the optional suite operatorframework
// (`--select-optional suite=operatorframework`): OperatorHub's metadata,
// the standard capabilities and categories, good practices, and the APIs
// removed by k8sVersion. (The multiple-architectures check inspects the
// images in a registry, which a test does not reach.)
var validators = append(append(interfaces.Validators{}, validation.DefaultBundleValidators...),
	validation.OperatorHubV2Validator,
	validation.StandardCapabilitiesValidator,
	validation.StandardCategoriesValidator,
	validation.GoodPracticesValidator,
	validation.AlphaDeprecatedAPIsValidator,
)

// validate loads the bundle in dir as operator-sdk does and runs the
// validators: their errors and warnings.
func validate(t *testing.T, dir string) (errs, warns []errors.Error) {
	t.Helper()
	bundle, err := manifests.GetBundleFromDir(dir)
	require.NoError(t, err, "load the bundle %s", dir)
	require.NotNil(t, bundle.CSV, "the bundle has a CSV")
	objs := append(bundle.ObjectsToValidate(), map[string]string{"k8s-version": k8sVersion})
	for _, r := range validators.Validate(objs...) {
		errs = append(errs, r.Errors...)
		warns = append(warns, r.Warnings...)
	}
	return errs, warns
}

// TestBundleValidates: the checked-in bundle passes every validator with
// no error (warnings are logged).
func TestBundleValidates(t *testing.T) {
	errs, warns := validate(t, bundleDir)
	for _, w := range warns {
		t.Logf("warning: %s", w)
	}
	for _, e := range errs {
		t.Errorf("error: %s", e)
	}
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha"}, bundle.Channels, "from metadata/annotations.yaml")
	assert.True(t, strings.HasPrefix(bundle.CSV.GetName(), "wsu.v"), bundle.CSV.GetName())
	assert.Len(t, bundle.V1CRDs, 1, "the WindowsInstance CRD")
	assert.NotEmpty(t, bundle.Objects, "the manifests beside the CSV")
}

// copyBundle copies the checked-in bundle into a temporary directory.
func copyBundle(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(bundleDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(bundleDir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	require.NoError(t, err)
	return dst
}

// TestBrokenBundlesFail: the same validation refuses a bundle whose CSV
// owns a CRD the bundle lacks, and one whose CSV names an unsupported
// category, so TestBundleValidates's pass means something.
func TestBrokenBundlesFail(t *testing.T) {
	t.Run("owned CRD missing", func(t *testing.T) {
		dir := copyBundle(t)
		require.NoError(t, os.Remove(filepath.Join(dir, "manifests", "wsu.dev_windowsinstances.yaml")))
		errs, _ := validate(t, dir)
		assert.True(t, anyContains(errs, "owned CRD"), "%v", errs)
	})
	t.Run("unknown category", func(t *testing.T) {
		dir := copyBundle(t)
		p := filepath.Join(dir, "manifests", "wsu.clusterserviceversion.yaml")
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		bad := strings.Replace(string(data), "categories: OpenShift Optional", "categories: Windows Things", 1)
		require.NotEqual(t, string(data), bad)
		require.NoError(t, os.WriteFile(p, []byte(bad), 0o644))
		errs, _ := validate(t, dir)
		assert.True(t, anyContains(errs, "Windows Things"), "%v", errs)
	})
}

func anyContains(errs []errors.Error, s string) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), s) {
			return true
		}
	}
	return false
}
