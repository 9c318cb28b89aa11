package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

// byohNamespace is where an overlay's BYOH inventory (the windows-instances
// ConfigMap, the cloud-private-key Secret) is: WMCO's namespace on
// OpenShift, wsu's own elsewhere.
func byohNamespace(o Overlay) string {
	if o.Flavour == "openshift" {
		return WMCONamespace
	}
	return o.Namespace
}

// joinAccess is what the join Job's ServiceAccount may and may not do.
func joinAccess(o Overlay) []access {
	ns, byoh := o.Namespace, byohNamespace(o)
	list := []access{
		allow("get", "", "configmaps", byoh, "windows-instances", "its inventory"),
		allow("get", "", "secrets", byoh, keySecret, "the SSH key"),
		deny("get", "", "secrets", byoh, otherSecret, "another Secret of the inventory's namespace"),
		deny("list", "", "secrets", byoh, "", "listing would read every Secret"),
		deny("get", "", "configmaps", byoh, "other", "another ConfigMap"),
		deny("get", "", "secrets", ns, otherSecret, "another Secret of its namespace"),
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
		// (A request for namespace N is in namespace N: a Role there may
		// grant it.)
		allow("get", "", "namespaces", ns, ns, "its own namespace: is wsu being uninstalled?"),
		deny("get", "", "namespaces", "default", "default", "no other namespace"),
		deny("update", "", "namespaces", ns, ns, "reads it only"),
		deny("get", "", "namespaces", "kube-system", "kube-system", "no other namespace"),
		deny("delete", "", "namespaces", ns, ns, "reads it only"),
		allow("get", "apiextensions.k8s.io", "customresourcedefinitions", "", "windowsinstances.wsu.dev", "its CRD: is wsu being uninstalled?"),
		deny("get", "apiextensions.k8s.io", "customresourcedefinitions", "", "other.example.com", "that CRD only"),
		allow("create", "authentication.k8s.io", "tokenreviews", "", "", "the metrics endpoint authenticates its callers"),
		allow("create", "authorization.k8s.io", "subjectaccessreviews", "", "", "the metrics endpoint authorizes its callers"),
		deny("update", "", "nodes", "", "", "labels and cordons are patches (the playbooks'); the controller never updates a Node"),
		allow("watch", wsu, "windowsinstances", ns, "", "its API"),
		allow("get", "", "services", "default", "kubernetes", "renewal approval: the API server's cluster IP"),
		allow("get", "discovery.k8s.io", "endpointslices", "default", "kubernetes", "renewal approval: the API server's addresses"),
		deny("get", "", "services", "default", "other", "the kubernetes Service only"),
		allow("update", wsu, "windowsinstances", ns, "", "finalizers").on("finalizers"),
		allow("patch", wsu, "windowsinstances", ns, "", "status").on("status"),
		allow("create", wsu, "windowsinstances", ns, "", "from the BYOH ConfigMap"),
		deny("list", wsu, "windowsinstances", "default", "", "only its namespace"),
		allow("watch", "", "configmaps", ns, "", "the BYOH ConfigMap"),
		allow("create", "", "configmaps", ns, "", "each instance's last plan text, wsu-plan-NAME"),
		allow("patch", "", "configmaps", ns, "wsu-plan-win-01", "a new plan's text"),
		deny("delete", "", "configmaps", ns, "", "deletes no ConfigMap (the plan text goes with its instance, by owner reference)"),
		deny("update", "", "configmaps", "default", "", "writes ConfigMaps only in its namespace"),
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
		allow("patch", "", "nodes", "", "", "the out-of-service mark wsu.dev/unavailable (its own role), labels and cordons (the playbooks')"),
		deny("patch", "", "nodes", "", "", "node status is the kubelet's").on("status"),
		allow("create", "", "pods", "default", "", "drain evicts pods").on("eviction"),
		deny("delete", "", "pods", "default", "", "evicts, never deletes"),
		allow("approve", cert, "signers", "", client, "kubelet client renewals"),
		allow("approve", cert, "signers", "", serve, "kubelet serving certificates"),
		deny("approve", cert, "signers", "", "kubernetes.io/kube-apiserver-client", "client certificates for anyone"),
		deny("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "no escalation"),
		deny("create", "apps", "deployments", ns, "", "nothing else"),
	}
	if o.JobMode {
		list = append(list,
			allow("create", "batch", "jobs", ns, "", "Job mode: each run's Job"),
			allow("watch", "batch", "jobs", ns, "", "Job mode: a Job's completion reconciles its instance"),
			allow("list", "batch", "jobs", ns, "", "Job mode: a new leader finds the runs a previous one started"),
			allow("patch", "batch", "jobs", ns, "", "Job mode: a Job whose result was read is marked recorded"),
			deny("delete", "batch", "jobs", ns, "", "Job mode: finished Jobs go by their TTL, never by the controller"),
			allow("list", "", "pods", ns, "", "Job mode: the result of the pod its Job controls"),
			deny("create", "batch", "jobs", "default", "", "Job mode: in its namespace only"),
			deny("update", "batch", "jobs", ns, "", "Job mode: only patches the recorded mark"))
	} else {
		list = append(list,
			deny("create", "batch", "jobs", ns, "", "no Job rights without Job mode"),
			deny("delete", "batch", "jobs", ns, "", "no Job rights without Job mode"))
	}
	if o.Flavour == "openshift" {
		byoh := WMCONamespace
		list = append(list,
			allow("get", "", "configmaps", byoh, "windows-instances", "WMCO's BYOH ConfigMap, by name"),
			allow("watch", "", "configmaps", byoh, "windows-instances", "its watch, by a metadata.name field selector"),
			allow("list", "", "configmaps", byoh, "windows-instances", "its cache, by a metadata.name field selector"),
			deny("list", "", "configmaps", byoh, "", "no other ConfigMap of WMCO's"),
			allow("get", "", "secrets", byoh, keySecret, "WMCO's key Secret, by name"),
			allow("watch", "", "secrets", byoh, keySecret, "the key watch, by name"),
			deny("get", "", "secrets", byoh, otherSecret, "no other Secret of WMCO's"),
			deny("watch", "", "secrets", byoh, "", "no other Secret of WMCO's"),
			allow("create", "", "events", byoh, "", "events about the BYOH ConfigMap's entries"),
			allow("get", "", "namespaces", byoh, byoh, "a BYOH ConfigMap gone with WMCO's namespace removes no host"))
	}
	// WMCO's operator Deployment, by name, where the BYOH ConfigMap is:
	// while it runs wsu leaves the ConfigMap to it (controller/wmco.go).
	wmco := byohNamespace(o)
	list = append(list,
		allow("get", "apps", "deployments", wmco, "windows-machine-config-operator", "WMCO's operator Deployment, by name"),
		allow("watch", "apps", "deployments", wmco, "windows-machine-config-operator", "its watch, by a metadata.name field selector"),
		allow("list", "apps", "deployments", wmco, "windows-machine-config-operator", "its cache, by a metadata.name field selector"),
		deny("list", "apps", "deployments", wmco, "", "no other Deployment"),
		deny("get", "apps", "deployments", wmco, "other", "no other Deployment"),
		deny("patch", "apps", "deployments", wmco, "windows-machine-config-operator", "never scales or edits WMCO"))
	// The windows-user-data Secret MachineSets reference
	// (controller/userdatasecret.go): whether the two namespaces exist,
	// on every cluster; the Secret itself on OpenShift only.
	for _, mapi := range []string{"openshift-machine-api", "openshift-cluster-api"} {
		list = append(list,
			allow("get", "", "namespaces", mapi, mapi, "the user-data Secret: is this OpenShift's Machine API?"),
			deny("get", "", "secrets", mapi, otherSecret, "windows-user-data only"),
			deny("list", "", "secrets", mapi, "", "windows-user-data only"),
			deny("delete", "", "secrets", mapi, "windows-user-data", "never deletes the user data"))
		if o.Flavour == "openshift" {
			list = append(list,
				allow("create", "", "secrets", mapi, "", "the user-data Secret"),
				allow("get", "", "secrets", mapi, "windows-user-data", "the user-data Secret, by name"),
				allow("update", "", "secrets", mapi, "windows-user-data", "the user-data Secret kept current with the key"),
				deny("update", "", "secrets", mapi, otherSecret, "windows-user-data only"))
		} else {
			list = append(list,
				deny("create", "", "secrets", mapi, "", "OpenShift only"),
				deny("get", "", "secrets", mapi, "windows-user-data", "OpenShift only"))
		}
	}
	return append(append(append(list, machineAccess(o)...), settingsAccess(o)...), flavourAccess(o)...)
}

// machineAccess is the controller's hold on the Machine API's Machines
// (controller/machines.go, machinereplace.go): it reads the Windows ones
// and deletes one to replace it, and reads a MachineSet's replicas (a
// replacement waits while its set is short), in openshift-machine-api on
// OpenShift only; it never writes a Machine or a MachineSet, nor touches
// either elsewhere.
func machineAccess(o Overlay) []access {
	mapi := "openshift-machine-api"
	list := []access{
		deny("create", "machine.openshift.io", "machines", mapi, "", "never makes a Machine: the MachineSet's"),
		deny("update", "machine.openshift.io", "machines", mapi, "win-a", "never edits a Machine"),
		deny("patch", "machine.openshift.io", "machines", mapi, "win-a", "never edits a Machine"),
		deny("delete", "machine.openshift.io", "machinesets", mapi, "windows", "never deletes a MachineSet"),
		deny("update", "machine.openshift.io", "machinesets", mapi, "windows", "never scales a MachineSet"),
		deny("delete", "machine.openshift.io", "machines", "openshift-cluster-api", "win-a", "Machines of openshift-machine-api only"),
		deny("delete", "machine.openshift.io", "machines", "default", "win-a", "Machines of openshift-machine-api only"),
	}
	if o.Flavour != "openshift" {
		return append(list,
			deny("get", "machine.openshift.io", "machines", mapi, "win-a", "OpenShift only"),
			deny("delete", "machine.openshift.io", "machines", mapi, "win-a", "OpenShift only"),
			deny("get", "machine.openshift.io", "machinesets", mapi, "windows", "OpenShift only"))
	}
	return append(list,
		allow("get", "machine.openshift.io", "machines", mapi, "win-a", "a Windows Machine becomes an instance"),
		allow("list", "machine.openshift.io", "machines", mapi, "", "the Machine cache"),
		allow("watch", "machine.openshift.io", "machines", mapi, "", "the Machine cache"),
		allow("delete", "machine.openshift.io", "machines", mapi, "win-a", "a Machine replaced (key changed, login refused)"),
		allow("get", "machine.openshift.io", "machinesets", mapi, "windows", "a replacement waits while its MachineSet is short"),
		deny("list", "machine.openshift.io", "machinesets", mapi, "", "MachineSets by name only"),
		deny("get", "machine.openshift.io", "machinesets", "openshift-cluster-api", "windows", "MachineSets of openshift-machine-api only"))
}

// settingsAccess is the controller's watch of the cluster settings it
// pushes to the nodes (controller/clustersettings.go): get, list and watch,
// by name where the name is known, and nothing more.
func settingsAccess(o Overlay) []access {
	list := []access{
		allow("watch", "config.openshift.io", "proxies", "", "cluster", "the Proxy, by name"),
		deny("list", "config.openshift.io", "proxies", "", "", "the Proxy cluster only"),
		allow("watch", "config.openshift.io", "imagedigestmirrorsets", "", "", "the mirror sets"),
		allow("watch", "config.openshift.io", "imagetagmirrorsets", "", "", "the mirror sets"),
		allow("watch", "machineconfiguration.openshift.io", "machineconfigs", "", "", "the kubelet CA join reads"),
		deny("update", "machineconfiguration.openshift.io", "machineconfigs", "", "", "reads only"),
		deny("list", "", "configmaps", "openshift-config", "", "no openshift-config ConfigMaps: wsu-trusted-ca is injected"),
	}
	if o.Flavour == "openshift" {
		return append(list,
			allow("watch", "", "configmaps", "openshift-kube-apiserver-operator", "kube-apiserver-to-kubelet-client-ca", "the kubelet CA WMCO watches, by name"),
			deny("list", "", "configmaps", "openshift-kube-apiserver-operator", "", "that ConfigMap only"),
			deny("update", "", "configmaps", "openshift-kube-apiserver-operator", "kube-apiserver-to-kubelet-client-ca", "reads only"),
			allow("watch", "", "secrets", "openshift-config", "pull-secret", "the mirrors' credentials, by name"),
			deny("watch", "", "secrets", "openshift-config", "", "the pull secret only"))
	}
	return append(list,
		allow("watch", "", "configmaps", "kube-public", "cluster-info", "the cluster CA, by name"),
		deny("list", "", "configmaps", "kube-public", "", "cluster-info only"),
		deny("update", "", "configmaps", "kube-public", "cluster-info", "reads only"))
}

// runAccess is what Job mode's runs (ServiceAccount wsu-run) may and may
// not do: the playbooks' rules, and no Secret (the kubelet mounts a run's
// Secrets).
func runAccess(o Overlay) []access {
	ns := o.Namespace
	list := []access{
		allow("delete", "", "nodes", "", "", "remove deletes the Node"),
		allow("patch", "", "nodes", "", "", "labels, cordons"),
		allow("create", "", "pods", "default", "", "drain evicts pods").on("eviction"),
		allow("approve", cert, "signers", "", client, "kubelet client CSRs"),
		deny("get", "", "secrets", ns, keySecret, "its Secrets are mounted by the kubelet"),
		deny("list", "", "configmaps", ns, "", "its request is mounted"),
		deny("create", "batch", "jobs", ns, "", "the controller's"),
		deny("patch", wsu, "windowsinstances", ns, "", "the controller's API").on("status"),
	}
	return append(list, flavourAccess(o)...)
}

// everyAccess is what no ServiceAccount the manifests create may do,
// whatever it is for: read Secrets outside what is named, anything in
// kube-system's Secrets beyond create, escalate, bind, impersonate, update
// Nodes, write RBAC or WMCO's namespace.
func everyAccess(o Overlay) []access {
	list := []access{
		deny("list", "", "secrets", "", "", "no Secret list cluster-wide"),
		deny("get", "", "secrets", "default", otherSecret, "no Secret outside what is named"),
		deny("list", "", "secrets", "default", "", "no Secret outside what is named"),
		deny("get", "", "secrets", "openshift-config", otherSecret, "the pull secret only"),
		deny("list", "", "secrets", "openshift-config", "", "the pull secret only, by name"),
		deny("update", "", "secrets", "openshift-config", "pull-secret", "never writes the pull secret"),
		deny("get", "", "secrets", "openshift-machine-config-operator", otherSecret, "node-bootstrapper-token only"),
		deny("get", "", "secrets", WMCONamespace, otherSecret, "cloud-private-key only"),
		deny("list", "", "secrets", WMCONamespace, "", "cloud-private-key only, by name"),
		deny("update", "", "secrets", WMCONamespace, keySecret, "never writes WMCO's key"),
		deny("update", "", "configmaps", WMCONamespace, "windows-instances", "never writes WMCO's inventory"),
		deny("create", "batch", "jobs", WMCONamespace, "", "no Jobs as WMCO's ServiceAccounts"),
		deny("create", "", "pods", WMCONamespace, "", "no pods as WMCO's ServiceAccounts"),
		deny("patch", "", "namespaces", WMCONamespace, WMCONamespace, "never relabels WMCO's namespace"),
		deny("delete", "", "namespaces", WMCONamespace, WMCONamespace, "never deletes WMCO's namespace"),
		deny("update", "", "nodes", "", "", "Nodes are patched, never replaced"),
		deny("patch", "", "nodes", "", "", "node status is the kubelet's").on("status"),
		deny("create", "", "serviceaccounts", "kube-system", "", "no token for kube-system's ServiceAccounts").on("token"),
		deny("create", "", "serviceaccounts", o.Namespace, "wsu-controller", "no token for its own namespace's ServiceAccounts").on("token"),
		deny("escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "no escalate"),
		deny("escalate", "rbac.authorization.k8s.io", "roles", o.Namespace, "", "no escalate"),
		deny("bind", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin", "no bind"),
		deny("bind", "rbac.authorization.k8s.io", "roles", o.Namespace, "", "no bind"),
		deny("create", "rbac.authorization.k8s.io", "clusterroles", "", "", "no RBAC writes"),
		deny("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "no RBAC writes"),
		deny("create", "rbac.authorization.k8s.io", "rolebindings", "kube-system", "", "no RBAC writes"),
		deny("impersonate", "", "users", "", "", "no impersonation"),
		deny("impersonate", "", "groups", "", "system:masters", "no impersonation"),
		deny("impersonate", "", "serviceaccounts", "kube-system", "", "no impersonation"),
		deny("impersonate", "authentication.k8s.io", "uids", "", "", "no impersonation"),
		deny("create", "", "pods", o.Namespace, "", "no pods of its own (Job mode's come from its Jobs)"),
		deny("create", "", "pods", o.Namespace, "", "no exec into pods").on("exec"),
		deny("create", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", "", "no admission changes"),
		deny("delete", "apiextensions.k8s.io", "customresourcedefinitions", "", "windowsinstances.wsu.dev", "never deletes its own CRD"),
	}
	for _, v := range []string{"get", "list", "watch", "update", "patch", "delete", "deletecollection"} {
		list = append(list, deny(v, "", "secrets", "kube-system", "bootstrap-token-abcdef", "no Secret access in kube-system beyond create"))
	}
	return list
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
			allow("get", "", "secrets", "openshift-config", "pull-secret", "k8s_image_mirrors: the mirror registries' credentials"),
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
		deny("get", "", "secrets", "openshift-config", "pull-secret", "OpenShift only"),
	}
}

// checkRBAC asks the API server's authorizer about each access, and makes a
// few real requests as each ServiceAccount.
//
// Every ServiceAccount the manifests create is asked: its own table and
// everyAccess; a ServiceAccount without a table fails the test.
func checkRBAC(ctx context.Context, t *testing.T, c *kubetest.Cluster, o Overlay, sas []string) {
	require.NoError(t, c.AwaitRBAC(ctx), "the authorizer has seen the applied RBAC")
	tables := map[string][]access{
		"wsu-join":       joinAccess(o),
		"wsu-controller": controllerAccess(o),
	}
	if o.JobMode {
		tables["wsu-run"] = runAccess(o)
	}
	for _, sa := range sas {
		t.Run("rbac "+sa, func(t *testing.T) {
			own, ok := tables[sa]
			require.True(t, ok, "the manifests create ServiceAccount %s, which has no table of what it may do", sa)
			user := "system:serviceaccount:" + o.Namespace + ":" + sa
			for _, a := range append(own, everyAccess(o)...) {
				t.Run(caseName(a), func(t *testing.T) {
					got := review(ctx, t, c, o.Namespace, user, a)
					assert.Equal(t, a.allowed, got, "%s may %s: want %v (%s)", sa, a, a.allowed, a.why)
				})
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
		byoh := byohNamespace(o)
		createSecrets(ctx, t, c, o.Namespace)
		createSecrets(ctx, t, c, byoh)
		createSecrets(ctx, t, c, "default")
		job := clientFor(t, c, o.Namespace, "wsu-join")
		_, err := job.CoreV1().Secrets(byoh).Get(ctx, keySecret, metav1.GetOptions{})
		assert.NoError(t, err, "the join Job reads its key")
		_, err = job.CoreV1().Secrets(byoh).Get(ctx, otherSecret, metav1.GetOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the join Job reads no other Secret: %v", err)
		_, err = job.CoreV1().Nodes().Create(ctx, nodeNamed("intruder"), metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the join Job creates no Node: %v", err)

		ctl := clientFor(t, c, o.Namespace, "wsu-controller")
		_, err = ctl.CoreV1().Secrets(byoh).Get(ctx, keySecret, metav1.GetOptions{})
		assert.NoError(t, err, "the controller reads the BYOH key")
		// Its cache's list and watch of the BYOH key, by name (a
		// metadata.name field selector), as the controller makes them.
		byName := metav1.ListOptions{FieldSelector: "metadata.name=" + keySecret}
		_, err = ctl.CoreV1().Secrets(byoh).List(ctx, byName)
		assert.NoError(t, err, "the controller lists the BYOH key by name")
		_, err = ctl.CoreV1().ConfigMaps(byoh).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=windows-instances"})
		assert.NoError(t, err, "the controller lists the BYOH ConfigMap by name")
		_, err = ctl.CoreV1().Secrets("default").Get(ctx, otherSecret, metav1.GetOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the controller reads no Secret outside its namespace: %v", err)
		_, err = ctl.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "nor lists them: %v", err)
		_, err = ctl.CoreV1().Secrets(o.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "by-the-controller"}}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "the controller creates no Secret: %v", err)
		err = ctl.CoreV1().Secrets(o.Namespace).Delete(ctx, otherSecret, metav1.DeleteOptions{})
		assert.True(t, apierrors.IsForbidden(err), "nor deletes one: %v", err)
	})
	t.Run("metrics endpoints by name", func(t *testing.T) { checkEndpointNames(ctx, t, c, o) })
}

// checkEndpointNames: the Role wsu-metrics lets wsu's ServiceAccounts
// create Services and write EndpointSlices in the namespace join publishes
// windows-exporter in; the ValidatingAdmissionPolicy wsu-metrics-endpoints
// limits them to the names k8s_metrics_endpoint writes (issue 26,
// finding 8). Real requests, as the controller.
func checkEndpointNames(ctx context.Context, t *testing.T, c *kubetest.Cluster, o Overlay) {
	ns := "kube-system"
	if o.Flavour == "openshift" {
		ns = WMCONamespace
	}
	ctl := clientFor(t, c, o.Namespace, "wsu-controller")
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "metrics", Port: 9182}}}}
	}
	slice := func(name, service string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.11"}}}}
	}
	// Someone else's slice, made by the admin.
	_, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("kube-dns-abcde", "kube-dns"), metav1.CreateOptions{})
	require.NoError(t, err)

	refused := func(t *testing.T, what string, do func() error) {
		t.Helper()
		// The API server compiles a new policy within a second or two.
		var err error
		for i := 0; i < 40; i++ {
			if err = do(); err != nil && strings.Contains(err.Error(), "wsu writes only") {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Errorf("%s: want refused by the policy, got %v", what, err)
	}
	t.Run("denied create of another Service", func(t *testing.T) {
		refused(t, "create Service kube-dns-2", func() error {
			_, err := ctl.CoreV1().Services(ns).Create(ctx, svc("kube-dns-2"), metav1.CreateOptions{})
			return err
		})
	})
	t.Run("denied create of another Service's slice", func(t *testing.T) {
		refused(t, "create EndpointSlice kube-dns-fake", func() error {
			_, err := ctl.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("kube-dns-fake", "kube-dns"), metav1.CreateOptions{})
			return err
		})
	})
	t.Run("denied a windows-exporter name for another Service", func(t *testing.T) {
		refused(t, "create EndpointSlice windows-exporter-x of kube-dns", func() error {
			_, err := ctl.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("windows-exporter-x", "kube-dns"), metav1.CreateOptions{})
			return err
		})
	})
	t.Run("denied delete of another Service's slice", func(t *testing.T) {
		refused(t, "delete EndpointSlice kube-dns-abcde", func() error {
			return ctl.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "kube-dns-abcde", metav1.DeleteOptions{})
		})
	})
	t.Run("allowed windows-exporter and its node's slice", func(t *testing.T) {
		_, err := ctl.CoreV1().Services(ns).Create(ctx, svc("windows-exporter"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = ctl.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("windows-exporter-win-1", "windows-exporter"), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, ctl.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "windows-exporter-win-1", metav1.DeleteOptions{}))
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

// caseName names a subtest after its question and answer.
func caseName(a access) string {
	verdict := "denied"
	if a.allowed {
		verdict = "allowed"
	}
	return verdict + " " + a.String()
}

func clientFor(t *testing.T, c *kubetest.Cluster, ns, name string) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(serviceAccount(c, ns, name))
	require.NoError(t, err)
	return cs
}
