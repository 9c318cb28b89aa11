package kubetest

import (
	"errors"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
)

// errWindows: envtest does not compile for Windows, and the test bed's
// binaries are Linux builds anyway. This file keeps the packages whose tests
// use kubetest compiling (and vetted) for Windows.
var errWindows = errors.New("kubetest: the Kubernetes test bed does not run on Windows")

type controlPlane struct{}

func newControlPlane(string, string, *signer, bool) *controlPlane { return &controlPlane{} }
func (*controlPlane) start() (*rest.Config, error)                { return nil, errWindows }
func (*controlPlane) stop() error                                 { return nil }
func (*controlPlane) kubeconfig() []byte                          { return nil }
func (*controlPlane) serviceAccountKey() string                   { return "" }
func (*controlPlane) addUser(string, []string) ([]byte, error)    { return nil, errWindows }

func installCRDs(*rest.Config, []*apiextensionsv1.CustomResourceDefinition, []string) error {
	return errWindows
}
