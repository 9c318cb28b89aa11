//go:build !windows

package kubetest

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controlPlane is envtest's etcd and kube-apiserver pair. envtest does not
// compile for Windows (controller-runtime v0.25), hence this seam.
type controlPlane struct{ env *envtest.Environment }

func newControlPlane(assets string) *controlPlane {
	return &controlPlane{env: &envtest.Environment{BinaryAssetsDirectory: assets}}
}

func (p *controlPlane) start() (*rest.Config, error) { return p.env.Start() }

// stop stops the API server, then etcd: the other order hangs the API
// server (envtest's ControlPlane.Stop keeps this order).
func (p *controlPlane) stop() error { return p.env.Stop() }

func (p *controlPlane) kubeconfig() []byte { return p.env.KubeConfig }

func (p *controlPlane) addUser(name string, groups []string) ([]byte, error) {
	u, err := p.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

func installCRDs(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, paths []string) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds, Paths: paths, ErrorIfPathMissing: true})
	return err
}
