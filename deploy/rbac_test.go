package deploy

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/test/kubetest"
)

// access is one question to the authorizer: may the subject do this?
type access struct {
	verb, group, resource, sub, ns, name string
	allowed                              bool
	why                                  string
}

func (a access) String() string {
	r := a.resource
	if a.sub != "" {
		r += "/" + a.sub
	}
	if a.group != "" {
		r += "." + a.group
	}
	where := "cluster-wide"
	if a.ns != "" {
		where = "in " + a.ns
	}
	name := ""
	if a.name != "" {
		name = " " + a.name
	}
	return fmt.Sprintf("%s %s%s %s", a.verb, r, name, where)
}

func allow(verb, group, resource, ns, name, why string) access {
	return access{verb: verb, group: group, resource: resource, ns: ns, name: name, allowed: true, why: why}
}

func deny(verb, group, resource, ns, name, why string) access {
	return access{verb: verb, group: group, resource: resource, ns: ns, name: name, why: why}
}

// sub sets the subresource.
func (a access) on(sub string) access { a.sub = sub; return a }

const (
	cert   = "certificates.k8s.io"
	client = "kubernetes.io/kube-apiserver-client-kubelet"
	serve  = "kubernetes.io/kubelet-serving"
	wsu    = "wsu.dev"
)

// joinAccess is what the join Job's ServiceAccount may and may not do.
func joinAccess(o Overlay) []access {
	ns := o.Namespace
	list := []access{
		allow("get", "", "configmaps", ns, "windows-instances", "its inventory"),
		allow("get", "", "secrets", ns, keySecret, "the SSH key"),
		deny("get", "", "secrets", ns, otherSecret, "another Secret of its namespace"),
		deny("list", "", "secrets", ns, "", "listing would read every Secret"),
		deny("get", "", "configmaps", ns, "other", "another ConfigMap"),
		deny("get", "", "secrets", "default", keySecret, "a Secret elsewhere"),
		allow("list", cert, "certificatesigningrequests", "", "", "finds the kubelet's CSRs"),
		allow("update", cert, "certificatesigningrequests", "", "", "approves them").on("approval"),
		allow("approve", cert, "signers", "", client, "the kubelet client signer"),
		allow("approve", cert, "signers", "", serve, "the kubelet serving signer"),
		deny("approve", cert, "signers", "", "kubernetes.io/kube-apiserver-client", "client certificates for anyone"),
		deny("approve", cert, "signers", "", "kubernetes.io/legacy-unknown", "another signer"),
		deny("approve", cert, "signers", "", "example.com/signer", "a custom signer"),
		deny("update", cert, "certificatesigningrequests", "", "", "signing is the signer's").on("status"),
		allow("get", "", "nodes", "", "", "waits for its Node"),
		allow("patch", "", "nodes", "", "", "labels and annotates its Node"),
		deny("update", "", "nodes", "", "", "patches only"),
		deny("delete", "", "nodes", "", "", "a join never removes a Node"),
		deny("create", "", "nodes", "", "", "the kubelet registers its Node"),
		deny("patch", "", "nodes", "", "", "node status is the kubelet's").on("status"),
		deny("create", "", "pods", "default", "", "a join never drains").on("eviction"),
		allow("list", "", "pods", "", "", "k8s_node_pods_wait: the network's pods on its node"),
		deny("get", "", "pods", "default", "", "lists only: its node's network pods"),
		deny("delete", "", "pods", "default", "", "a join never drains"),
		allow("list", "apps", "daemonsets", "", "", "k8s_windows_network: the Windows network's DaemonSets"),
		deny("update", "apps", "daemonsets", "default", "", "reads only"),
		allow("get", "", "configmaps", "ovn-kubernetes", "ovnkube-config", "k8s_windows_network: OVN-Kubernetes' hybrid overlay"),
		deny("get", "", "configmaps", "ovn-kubernetes", "other", "that one ConfigMap only"),
		allow("get", "networking.k8s.io", "servicecidrs", "", "kubernetes", "k8s_cluster_network: the service network"),
		deny("get", "networking.k8s.io", "servicecidrs", "", "other", "only the cluster's own"),
		allow("get", "", "services", "default", "kubernetes", "CSR approval: the API server's cluster IP, which no serving certificate may name"),
		allow("get", "discovery.k8s.io", "endpointslices", "default", "kubernetes", "CSR approval: the API server's addresses"),
		deny("get", "", "services", "default", "other", "the kubernetes Service only"),
		deny("list", "discovery.k8s.io", "endpointslices", "default", "", "the kubernetes slice only"),
		deny("update", "discovery.k8s.io", "endpointslices", "default", "kubernetes", "reads only"),
		deny("create", wsu, "windowsinstances", ns, "", "the controller's API"),
		deny("create", "rbac.authorization.k8s.io", "rolebindings", ns, "", "no escalation"),
	}
	return append(list, flavourAccess(o)...)
}

// controllerAccess is what the controller's ServiceAccount may and may not do.
func controllerAccess(o Overlay) []access {
	ns := o.Namespace
	list := []access{
		allow("watch", wsu, "windowsinstances", ns, "", "its API"),
		allow("get", "", "services", "default", "kubernetes", "renewal approval: the API server's cluster IP"),
		allow("get", "discovery.k8s.io", "endpointslices", "default", "kubernetes", "renewal approval: the API server's addresses"),
		deny("get", "", "services", "default", "other", "the kubernetes Service only"),
		allow("update", wsu, "windowsinstances", ns, "", "finalizers").on("finalizers"),
		allow("patch", wsu, "windowsinstances", ns, "", "status").on("status"),
		allow("create", wsu, "windowsinstances", ns, "", "from the BYOH ConfigMap"),
		deny("list", wsu, "windowsinstances", "default", "", "only its namespace"),
		allow("watch", "", "configmaps", ns, "", "the BYOH ConfigMap"),
		deny("update", "", "configmaps", ns, "", "reads ConfigMaps only"),
		deny("list", "", "configmaps", "default", "", "only its namespace"),
		allow("get", "", "secrets", ns, otherSecret, "an instance's keySecretRef names any Secret of its namespace"),
		allow("watch", "", "secrets", ns, "", "the key Secret watch (metadata only) wakes a rotation"),
		allow("list", "", "secrets", ns, "", "the key Secret watch's cache"),
		deny("list", "", "secrets", "default", "", "only its namespace"),
		deny("watch", "", "secrets", "", "", "not cluster-wide"),
		deny("create", "", "secrets", ns, "", "writes no Secret: Job mode mounts the Secrets by reference"),
		deny("update", "", "secrets", ns, keySecret, "never edits a key Secret"),
		deny("patch", "", "secrets", ns, keySecret, "never edits a key Secret"),
		deny("delete", "", "secrets", ns, keySecret, "never deletes a Secret"),
		deny("get", "", "secrets", "default", otherSecret, "no Secret outside its namespace"),
		allow("create", "", "events", ns, "", "events"),
		allow("update", "coordination.k8s.io", "leases", ns, "wsu-controller.wsu.dev", "leader election"),
		deny("get", "coordination.k8s.io", "leases", "kube-system", "", "only its namespace"),
		allow("delete", "", "nodes", "", "", "removal deletes the Node"),
		allow("watch", "", "nodes", "", "", "Node readiness"),
		deny("patch", "", "nodes", "", "", "node status is the kubelet's").on("status"),
		allow("create", "", "pods", "default", "", "drain evicts pods").on("eviction"),
		deny("delete", "", "pods", "default", "", "evicts, never deletes"),
		allow("approve", cert, "signers", "", client, "kubelet client renewals"),
		allow("approve", cert, "signers", "", serve, "kubelet serving certificates"),
		deny("approve", cert, "signers", "", "kubernetes.io/kube-apiserver-client", "client certificates for anyone"),
		deny("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "no escalation"),
		deny("create", "apps", "deployments", ns, "", "nothing else"),
	}
	return append(list, flavourAccess(o)...)
}

// flavourAccess is what depends on the cluster, for both ServiceAccounts.
func flavourAccess(o Overlay) []access {
	if o.Flavour == "openshift" {
		return []access{
			allow("get", "", "secrets", "openshift-machine-config-operator", "node-bootstrapper-token", "the bootstrap kubeconfig's token"),
			deny("get", "", "secrets", "openshift-machine-config-operator", otherSecret, "that token only"),
			deny("list", "", "secrets", "kube-system", "", "no bootstrap tokens on OpenShift"),
			deny("get", "", "configmaps", "kube-public", "cluster-info", "no cluster-info on OpenShift"),
			allow("get", "", "configmaps", "openshift-config", "user-ca-bundle", "k8s_trusted_ca: the proxy's trusted CA bundle"),
			deny("list", "", "configmaps", "openshift-config", "", "read by the name the Proxy gives"),
			deny("get", "", "secrets", "openshift-config", "pull-secret", "no Secret of openshift-config"),
			allow("get", "config.openshift.io", "proxies", "", "cluster", "k8s_trusted_ca: which ConfigMap"),
			allow("list", "config.openshift.io", "imagedigestmirrorsets", "", "", "k8s_image_mirrors"),
			allow("list", "config.openshift.io", "imagetagmirrorsets", "", "", "k8s_image_mirrors"),
			deny("patch", "config.openshift.io", "imagedigestmirrorsets", "", "", "reads only"),
		}
	}
	return []access{
		// kubeadm joins mint a fresh bootstrap token each: create on
		// kube-system Secrets and nothing else (reading them there
		// reaches cluster-admin; docs/install.md says why).
		allow("create", "", "secrets", "kube-system", "", "bootstrap tokens"),
		deny("list", "", "secrets", "kube-system", "", "never lists kube-system's Secrets"),
		deny("get", "", "secrets", "kube-system", "", "never reads a kube-system Secret"),
		deny("get", "", "secrets", "kube-system", "bootstrap-token-abcdef", "not even a token it made"),
		deny("watch", "", "secrets", "kube-system", "", "never watches them"),
		deny("update", "", "secrets", "kube-system", "bootstrap-token-abcdef", "never edits a token"),
		deny("delete", "", "secrets", "kube-system", "", "tokencleaner deletes expired tokens"),
		allow("get", "", "configmaps", "kube-public", "cluster-info", "the cluster CA and API server URL"),
		deny("get", "", "configmaps", "kube-public", "other", "cluster-info only"),
		deny("get", "", "secrets", "openshift-machine-config-operator", "node-bootstrapper-token", "OpenShift only"),
		allow("get", "", "configmaps", "kube-system", "kubeadm-config", "k8s_cluster_network: kubeadm's service network"),
		allow("get", "", "configmaps", "kube-system", "kubelet-config", "k8s_kubelet_config: kubeadm's kubelet configuration"),
		allow("get", "", "services", "kube-system", "kube-dns", "k8s_cluster_network: the cluster DNS address"),
		deny("get", "", "configmaps", "kube-system", "other", "kubeadm-config and kubelet-config only"),
		deny("list", "", "services", "kube-system", "", "kube-dns only"),
		deny("get", "", "configmaps", "openshift-config", "user-ca-bundle", "OpenShift only"),
	}
}

// checkRBAC asks the API server's authorizer about each access, and makes a
// few real requests as each ServiceAccount.
func checkRBAC(ctx context.Context, t *testing.T, c *kubetest.Cluster, o Overlay) {
	for _, sa := range []struct {
		name string
		list []access
	}{
		{"wsu-join", joinAccess(o)},
		{"wsu-controller", controllerAccess(o)},
	} {
		t.Run("rbac "+sa.name, func(t *testing.T) {
			user := "system:serviceaccount:" + o.Namespace + ":" + sa.name
			for _, a := range sa.list {
				got := review(ctx, t, c, o.Namespace, user, a)
				assert.Equal(t, a.allowed, got, "%s may %s: want %v (%s)", sa.name, a, a.allowed, a.why)
			}
		})
	}
	if o.Flavour == "kubeadm" {
		// deploy/rbac/kubeadm-bootstrappers: wsu's bootstrap tokens may
		// create and watch CSRs and get Nodes, and no more; in particular
		// not certificatesigningrequests/nodeclient, which is what
		// kube-controller-manager's csrapproving asks before approving a
		// client CSR: k8s_csr_approve stays the gate.
		t.Run("rbac system:bootstrappers:wsu", func(t *testing.T) {
			groups := []string{"system:bootstrappers:wsu", "system:bootstrappers", "system:authenticated"}
			for _, a := range []access{
				allow("create", cert, "certificatesigningrequests", "", "", "the kubelet's client CSR"),
				allow("get", cert, "certificatesigningrequests", "", "", "waits for its certificate"),
				allow("watch", cert, "certificatesigningrequests", "", "", "waits for its certificate"),
				allow("get", "", "nodes", "", "win-1", "a node-side join checks its Node"),
				deny("create", cert, "certificatesigningrequests", "", "", "no auto-approval").on("nodeclient"),
				deny("create", cert, "certificatesigningrequests", "", "", "no renewal approval").on("selfnodeclient"),
				deny("update", cert, "certificatesigningrequests", "", "", "never approves").on("approval"),
				deny("list", "", "nodes", "", "", "get only"),
				deny("get", "", "secrets", "kube-system", "", "no Secrets"),
				deny("get", "", "configmaps", "kube-system", "kubeadm-config", "wsu writes the kubelet's config"),
			} {
				got := reviewAs(ctx, t, c, "system:bootstrap:abcdef", groups, a)
				assert.Equal(t, a.allowed, got, "a wsu bootstrap token may %s: want %v (%s)", a, a.allowed, a.why)
			}
		})
	}
	t.Run("requests as the ServiceAccounts", func(t *testing.T) {
		createSecrets(ctx, t, c, o.Namespace)
		createSecrets(ctx, t, c, "default")
		job := clientFor(t, c, o.Namespace, "wsu-join")
		_, err := job.CoreV1().Secrets(o.Namespace).Get(ctx, keySecret, metav1.GetOptions{})
		assert.NoError(t, err, "the join Job reads its key")
		_, err = job.CoreV1().Secrets(o.Namespace).Get(ctx, otherSecret, metav1.GetOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the join Job reads no other Secret: %v", err)
		_, err = job.CoreV1().Nodes().Create(ctx, nodeNamed("intruder"), metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the join Job creates no Node: %v", err)

		ctl := clientFor(t, c, o.Namespace, "wsu-controller")
		_, err = ctl.CoreV1().Secrets(o.Namespace).Get(ctx, keySecret, metav1.GetOptions{})
		assert.NoError(t, err, "the controller reads a key in its namespace")
		_, err = ctl.CoreV1().Secrets("default").Get(ctx, otherSecret, metav1.GetOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the controller reads no Secret outside its namespace: %v", err)
		_, err = ctl.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "nor lists them: %v", err)
		_, err = ctl.CoreV1().Secrets(o.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "by-the-controller"}}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the controller creates no Secret: %v", err)
		err = ctl.CoreV1().Secrets(o.Namespace).Delete(ctx, otherSecret, metav1.DeleteOptions{})
		assert.True(t, apierrors.IsForbidden(err), "nor deletes one: %v", err)
	})
}

// review asks a SubjectAccessReview for user and the groups every
// ServiceAccount of ns has.
func review(ctx context.Context, t *testing.T, c *kubetest.Cluster, ns, user string, a access) bool {
	t.Helper()
	return reviewAs(ctx, t, c, user, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, a)
}

// reviewAs asks a SubjectAccessReview for user in groups.
func reviewAs(ctx context.Context, t *testing.T, c *kubetest.Cluster, user string, groups []string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
		},
	}}
	got, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	require.NoError(t, err)
	return got.Status.Allowed
}

func clientFor(t *testing.T, c *kubetest.Cluster, ns, name string) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(serviceAccount(c, ns, name))
	require.NoError(t, err)
	return cs
}
