package kubetest

import (
	"context"
	"testing"
)

// KubectlBinary is the path of the real kubectl at the test bed's
// Kubernetes version, built from k8s.io/kubectl and cached like the
// control plane (minutes the first time, then instant; `make kubetest`
// builds it ahead). Tests run it where an admin would run kubectl, never
// whatever kubectl PATH holds.
func KubectlBinary(t testing.TB) string {
	t.Helper()
	paths, err := Binaries(context.Background(), t.Logf, Kubectl)
	if err != nil {
		t.Fatalf("building kubectl (make kubetest builds it ahead): %v", err)
	}
	return paths[Kubectl]
}
