// Package v1alpha1 is the wsu.dev/v1alpha1 API: WindowsInstance, one Windows
// host the controller joins to the cluster, keeps joined, upgrades and
// removes with the stock (or a site's) playbooks. The CRD in
// deploy/crd is generated from these types by controller-gen (make generate).
//
// +kubebuilder:object:generate=true
// +groupName=wsu.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "wsu.dev", Version: "v1alpha1"}

// AddToScheme adds the API's types to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WindowsInstance{}, &WindowsInstanceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
