package kube

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// ImageMirrors reads OpenShift's image mirror sets, the cluster's record of
// where images are mirrored in a disconnected cluster, for
// win_containerd_mirrors to write on the nodes (WMCO's registry
// controller does the same from the same objects).
type ImageMirrors struct{ Clusters }

var _ modules.Module = ImageMirrors{}

var (
	idmsGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "imagedigestmirrorsets"}
	itmsGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "imagetagmirrorsets"}
)

// mirrorType is one entry, the shape win_containerd_mirrors takes.
var mirrorType = cty.Object(map[string]cty.Type{
	"source": cty.String, "mirrors": cty.List(cty.String), "resolve_tags": cty.Bool, "never_contact_source": cty.Bool,
})

var imageMirrorsAttributes = []modules.Attribute{
	{Name: "pull_secret", Type: cty.String, Default: cty.StringVal(kube.PullSecretNamespace + "/" + kube.PullSecretName),
		Description: "The Secret (`namespace/name`, type `kubernetes.io/dockerconfigjson`) whose credentials the mirror registries get: for each registry host a mirror lives on, its `auths` entry, and no other (WMCO reads the same pull secret). A Secret that does not exist gives none; one that cannot be read fails the task. `\"\"`: read none."},
}

var imageMirrorsResults = []modules.Attribute{
	{Name: "mirrors", Type: cty.List(mirrorType), Description: "Every entry of every ImageDigestMirrorSet (`resolve_tags = false`) and then every ImageTagMirrorSet (`resolve_tags = true`), each set by name: `{ source, mirrors, resolve_tags, never_contact_source }`. Empty when the cluster has none or does not serve them."},
	{Name: "auths", Type: cty.Map(cty.String), Sensitive: true, Description: "The pull secret's credentials of the mirrors' registry hosts (`host[:port]` → base64 of `user:password`), the shape `win_containerd_mirrors`' `auths` takes; empty when no mirror host has an entry. Never shown."},
	{Name: "reason", Type: cty.String, Description: "What was found, in a sentence."},
}

func (ImageMirrors) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_image_mirrors",
		Summary: "Read the cluster's image mirror sets (ImageDigestMirrorSet, ImageTagMirrorSet).",
		Description: "Read-only. Lists `imagedigestmirrorsets` and `imagetagmirrorsets` " +
			"(`config.openshift.io/v1`) and returns their entries in the shape " +
			"`win_containerd_mirrors` takes: a digest mirror set's mirrors serve pulls by digest only, a " +
			"tag mirror set's may resolve tags, and `mirrorSourcePolicy: NeverContactSource` becomes " +
			"`never_contact_source`. A cluster that does not serve these resources (not OpenShift, or " +
			"older than 4.13) has no mirrors: the result is empty and says so. With mirrors, the cluster's " +
			"pull secret is read for the credentials of the registries they live on (`auths`), as WMCO does.",
		Target:     modules.TargetController,
		Attributes: withConn(imageMirrorsAttributes...),
		Results:    imageMirrorsResults,
		Show:       "reason",
		Example: `task "image mirrors" {
  k8s_image_mirrors {}
}`,
	}
}

// mirrorSetEntries reads one kind of mirror set; served is false when the
// cluster does not serve it.
func mirrorSetEntries(ctx context.Context, cl *kube.Client, gvr schema.GroupVersionResource, field string, resolveTags bool) (entries []cty.Value, sets int, servedOK bool, err error) {
	ok, err := served(cl, gvr)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	list, err := cl.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, true, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
	}
	for _, item := range list.Items { // the API server lists by name
		raw, _, err := unstructured.NestedSlice(item.Object, "spec", field)
		if err != nil {
			return nil, 0, true, fmt.Errorf("%s %s: spec.%s: %w", gvr.Resource, item.GetName(), field, err)
		}
		for _, r := range raw {
			m, _ := r.(map[string]any)
			source, _, _ := unstructured.NestedString(m, "source")
			mirrors, _, _ := unstructured.NestedStringSlice(m, "mirrors")
			policy, _, _ := unstructured.NestedString(m, "mirrorSourcePolicy")
			entries = append(entries, cty.ObjectVal(map[string]cty.Value{
				"source": cty.StringVal(source), "mirrors": strList(mirrors),
				"resolve_tags": cty.BoolVal(resolveTags), "never_contact_source": cty.BoolVal(policy == "NeverContactSource"),
			}))
		}
	}
	return entries, len(list.Items), true, nil
}

// read lists both kinds and the mirrors' credentials, for Plan and Apply
// alike: it is read-only.
func (m ImageMirrors) read(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	if diags := requireKnown(cfg, "pull_secret"); diags.HasErrors() {
		return unknownResult(imageMirrorsResults), diags
	}
	ref, diags := pullSecretRef(cfg)
	cl, known, cdiags := m.client(cfg)
	if diags = append(diags, cdiags...); diags.HasErrors() || !known {
		return unknownResult(imageMirrorsResults), diags
	}
	digest, nDigest, servedDigest, err := mirrorSetEntries(ctx, cl, idmsGVR, "imageDigestMirrors", false)
	if err != nil {
		return unknownResult(imageMirrorsResults), apiError(cfg, "kubeconfig", "Cannot read the image mirror sets", err)
	}
	tag, nTag, servedTag, err := mirrorSetEntries(ctx, cl, itmsGVR, "imageTagMirrors", true)
	if err != nil {
		return unknownResult(imageMirrorsResults), apiError(cfg, "kubeconfig", "Cannot read the image mirror sets", err)
	}
	all := append(digest, tag...)
	reason := fmt.Sprintf("%d mirror entries from %d ImageDigestMirrorSets and %d ImageTagMirrorSets", len(all), nDigest, nTag)
	if !servedDigest && !servedTag {
		reason = "no mirrors: the API server serves neither imagedigestmirrorsets nor imagetagmirrorsets (config.openshift.io)"
	}
	auths, said, err := mirrorAuths(ctx, cl, ref, mirrorHosts(all))
	if err != nil {
		return unknownResult(imageMirrorsResults), apiError(cfg, "pull_secret", "Cannot read the pull secret", err)
	}
	if said != "" {
		reason += "; " + said
	}
	list := cty.ListValEmpty(mirrorType)
	if len(all) > 0 {
		list = cty.ListVal(all)
	}
	return result(imageMirrorsResults, map[string]cty.Value{
		"mirrors": list, "auths": authsValue(auths), "reason": cty.StringVal(reason),
	}), nil
}

func (m ImageMirrors) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.read(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m ImageMirrors) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.read(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
