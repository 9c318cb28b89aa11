package approval

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// DefaultNamespace is WMCO's, where its users keep the BYOH ConfigMap and
// the cloud-private-key Secret: the controller's namespace, and so its
// WindowsInstances', unless told otherwise.
const DefaultNamespace = "openshift-windows-machine-config-operator"

// NewScheme holds the core types and wsu.dev/v1alpha1.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := wsuv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
