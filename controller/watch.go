package controller

import (
	"bufio"
	"context"
	"os"
	"strings"

	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

func nodeObject() client.Object      { return &corev1.Node{} }
func configMapObject() client.Object { return &corev1.ConfigMap{} }

// nodeToInstances wakes the instances whose Node changed (it became Ready,
// or went away).
func nodeToInstances(c client.Client, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &wsuv1.WindowsInstanceList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, wi := range list.Items {
			if wi.Status.NodeName == obj.GetName() || instanceNodeName(&wi) == obj.GetName() || strings.EqualFold(wi.Status.Identity.Hostname, obj.GetName()) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wi.Namespace, Name: wi.Name}})
			}
		}
		return out
	})
}

// onlyConfigMap keeps the BYOH reconciler to its one ConfigMap.
// byohInstanceToConfigMap wakes the BYOH ConfigMap's reconciler when one of
// its instances (label wsu.dev/source=configmap) changes or goes.
func byohInstanceToConfigMap(namespace, name string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if obj.GetLabels()[wsuv1.SourceLabel] != wsuv1.SourceConfigMap {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
	})
}

func onlyConfigMap(namespace, name string) builder.Predicates {
	return builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == namespace && obj.GetName() == name
	}))
}

// pinnedHostKey reads the key a trust-on-first-use connection recorded in
// file: the key in authorized_keys format and its SHA256 fingerprint, or ""
// when there is none.
func pinnedHostKey(file string) (key, fingerprint string) {
	f, err := os.Open(file)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(fields[1] + " " + fields[2]))
		if err != nil {
			continue
		}
		return fields[1] + " " + fields[2], gossh.FingerprintSHA256(pub)
	}
	return "", ""
}
