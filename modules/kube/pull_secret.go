package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/registries"
)

// The mirrors' credentials come from the cluster's pull secret, as WMCO's
// do: only the entries of the registry hosts a mirror lives on leave the
// cluster for the node, never the rest (registry.redhat.io, quay.io,
// cloud.openshift.com, which the node does not pull from through a
// mirror). The values stay sensitive from the Secret to hosts.toml.

// pullSecretRef is pull_secret as namespace and name; a zero value means
// none is read.
func pullSecretRef(cfg modules.Config) (types.NamespacedName, hcl.Diagnostics) {
	v, _ := str(get(cfg, "pull_secret"))
	if v == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, hcl.Diagnostics{cfg.Error("pull_secret", "Invalid pull_secret",
			fmt.Sprintf("%q is not namespace/name of a Secret (for example %s/%s), nor \"\".", v, kube.PullSecretNamespace, kube.PullSecretName))}
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// mirrorHosts are the registry hosts (host[:port]) the entries' mirrors
// live on.
func mirrorHosts(entries []cty.Value) map[string]bool {
	hosts := map[string]bool{}
	for _, e := range entries {
		for it := e.GetAttr("mirrors").ElementIterator(); it.Next(); {
			_, m := it.Element()
			hosts[registries.Host(m.AsString())] = true
		}
	}
	return hosts
}

// dockerConfig is a .dockerconfigjson's content.
type dockerConfig struct {
	Auths map[string]struct {
		Auth     string `json:"auth"`
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"auths"`
}

// mirrorAuths reads ref's credentials of hosts. said tells what was found,
// in words with no secret in them; a missing Secret gives none (said says
// so), a Secret that cannot be read or parsed is an error.
func mirrorAuths(ctx context.Context, cl *kube.Client, ref types.NamespacedName, hosts map[string]bool) (auths map[string]string, said string, err error) {
	if ref.Name == "" || len(hosts) == 0 {
		return nil, "", nil
	}
	sec, err := cl.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("no registry credentials: there is no Secret %s", ref), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading Secret %s: %w", ref, err)
	}
	raw, ok := sec.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, "", fmt.Errorf("the Secret %s has no %s", ref, corev1.DockerConfigJsonKey)
	}
	var dc dockerConfig
	if err := json.Unmarshal(raw, &dc); err != nil {
		// The error would quote the content: say where, not what.
		return nil, "", fmt.Errorf("the Secret %s: its %s is not a docker config (JSON with auths)", ref, corev1.DockerConfigJsonKey)
	}
	auths = map[string]string{}
	for host, a := range dc.Auths {
		if !hosts[host] {
			continue
		}
		switch {
		case a.Auth != "":
			auths[host] = a.Auth
		case a.Username != "":
			auths[host] = base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		}
	}
	names := make([]string, 0, len(auths))
	for h := range auths {
		names = append(names, h)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return auths, fmt.Sprintf("no credentials for the mirror registries in %s", ref), nil
	}
	return auths, fmt.Sprintf("credentials for %s from %s", strings.Join(names, ", "), ref), nil
}

// authsValue is auths as the result's map; empty, not null, without any.
func authsValue(auths map[string]string) cty.Value {
	if len(auths) == 0 {
		return cty.MapValEmpty(cty.String)
	}
	m := make(map[string]cty.Value, len(auths))
	for h, a := range auths {
		m[h] = cty.StringVal(a)
	}
	return cty.MapVal(m)
}
