package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/wsu-project/wsu/kube"
)

// A missing grant for one of the settings' watches is reported at the
// controller's start, not discovered as a hang: a cache whose informer may
// not list or watch its kind never syncs, and the instances' passes wait
// for it forever. Before the watches start, the controller asks the API
// server (a SelfSubjectAccessReview, which every authenticated user may
// create) whether it may list and watch each source, and refuses to start
// naming the object and the Role that grants it.

// checkSettingsAccess says which of the sources the controller may not
// list and watch, and what to bind.
func checkSettingsAccess(cfg *rest.Config, mapper meta.RESTMapper, sources []settingsSource) error {
	cl, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var missing []string
	for _, src := range sources {
		m, err := mapper.RESTMapping(src.gvk.GroupKind(), src.gvk.Version)
		if err != nil {
			return fmt.Errorf("discovering %s: %w", src.gvk.GroupKind(), err)
		}
		for _, at := range src.places() {
			for _, verb := range []string{"list", "watch"} {
				ok, err := allowed(ctx, cl, authorizationv1.ResourceAttributes{
					Namespace: at.namespace, Name: at.name, Verb: verb,
					Group: m.Resource.Group, Version: m.Resource.Version, Resource: m.Resource.Resource,
				})
				if err != nil {
					return fmt.Errorf("checking the controller's access to %s: %w", m.Resource.Resource, err)
				}
				if !ok {
					missing = append(missing, fmt.Sprintf("may not %s %s %s: bind %s", verb, m.Resource.Resource, at, grantFor(at.namespace)))
					break
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return errors.New("cannot watch the cluster settings it pushes to nodes (clustersettings.go): " + strings.Join(missing, "; "))
}

// place is where a source's objects are: a namespace ("" cluster-wide)
// and a name ("" any).
type place struct{ namespace, name string }

func (p place) String() string {
	switch {
	case p.namespace == "" && p.name == "":
		return "(cluster-wide)"
	case p.namespace == "":
		return p.name
	case p.name == "":
		return p.namespace + "/*"
	}
	return p.namespace + "/" + p.name
}

// places are where the source is watched.
func (s settingsSource) places() []place {
	if s.namespace == nil {
		return []place{{name: s.name}}
	}
	var out []place
	for ns, name := range s.namespace {
		out = append(out, place{namespace: ns, name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].namespace < out[j].namespace })
	return out
}

// grantFor names the Role that grants the controller a source in namespace.
func grantFor(namespace string) string {
	switch namespace {
	case ClusterInfoNamespace:
		return "the Role wsu-cluster-info (deploy/rbac/wsu-cluster-role.yaml) to the controller's ServiceAccount"
	case KubeletCANamespace:
		return "the Role wsu-controller-kubelet-ca (deploy/overlays/openshift/cluster-settings.yaml) to the controller's ServiceAccount"
	case kube.PullSecretNamespace:
		return "the Role wsu-pull-secret (deploy/rbac/wsu-cluster-role.yaml) to the controller's ServiceAccount"
	}
	return "the controller's generated ClusterRole and Role (deploy/rbac/controller/role.yaml, wsu-controller) to its ServiceAccount"
}

// allowed asks the API server whether the caller may do what attrs say.
func allowed(ctx context.Context, cl authorizationclient.AuthorizationV1Interface, attrs authorizationv1.ResourceAttributes) (bool, error) {
	review, err := cl.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}
