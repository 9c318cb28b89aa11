// Package kubeinv loads an inventory from a cluster: `-i k8s://NAMESPACE/NAME`
// reads a BYOH windows-instances ConfigMap (as the Windows Machine Config
// Operator does) and the SSH private key in the Secret cloud-private-key of
// the same namespace. The parsing is inventory.ParseWindowsInstances; this
// package only fetches, so the parser can be fuzzed without a cluster.
package kubeinv

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/inventory"
)

const (
	// Scheme starts an inventory argument that names a ConfigMap.
	Scheme = "k8s://"
	// KeySecret and KeySecretKey are where BYOH keeps the private key the
	// hosts accept: the Secret cloud-private-key, key private-key.pem.
	KeySecret    = "cloud-private-key"
	KeySecretKey = "private-key.pem"
	// KeyVar is the host variable that carries the key's text to the SSH
	// transport. The value is marked sensitive (and the engine hides any
	// variable named like a private key anyway).
	KeyVar = "ssh_private_key"
	// NewKeySecretKey is where an admin rotating the key puts the new one,
	// beside the old: the Secret then holds both while the hosts move over
	// (wsu:rotate-key, or the controller), and the new key replaces
	// private-key.pem once every host accepts it. NewKeyVar carries it to
	// rotate-key's variable of that name (sensitive).
	NewKeySecretKey = "private-key.pem.new"
	NewKeyVar       = "new_private_key"
	// sensitive is engine.Sensitive, the mark that hides a value.
	sensitive = "sensitive"
)

// IsRef reports whether an -i argument names a ConfigMap.
func IsRef(arg string) bool { return strings.HasPrefix(arg, Scheme) }

// ParseRef splits "k8s://NAMESPACE/NAME" and checks both names.
func ParseRef(arg string) (namespace, name string, diags hcl.Diagnostics) {
	bad := func(why string) (string, string, hcl.Diagnostics) {
		return "", "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid inventory reference",
			Detail: fmt.Sprintf("%q %s. A cluster inventory is written %sNAMESPACE/NAME, e.g. %sopenshift-windows-machine-config-operator/windows-instances.",
				arg, why, Scheme, Scheme),
		}}
	}
	rest := strings.TrimPrefix(arg, Scheme)
	namespace, name, ok := strings.Cut(rest, "/")
	switch {
	case !ok || namespace == "" || name == "":
		return bad("does not name both a namespace and a ConfigMap")
	case strings.Contains(name, "/"):
		return bad("has more than two parts")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return bad(fmt.Sprintf("has an invalid namespace %q: %s", namespace, strings.Join(errs, "; ")))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return bad(fmt.Sprintf("has an invalid ConfigMap name %q: %s", name, strings.Join(errs, "; ")))
	}
	return namespace, name, nil
}

// Load reads the windows-instances ConfigMap ref names and its namespace's
// cloud-private-key Secret. It returns the inventory and the text its
// diagnostics' ranges point into (inventory.WindowsInstancesText), for a
// view to quote and for a saved plan to notice a changed ConfigMap.
//
// A missing ConfigMap is an error (with the closest name in the namespace,
// if one is readable): a typo must not look like a cluster without hosts. An
// empty one is an inventory without hosts. A missing or unreadable Secret is
// a warning: the hosts load without ssh_private_key, and the SSH transport
// falls back to the ssh-agent or the default keys.
func Load(ctx context.Context, client kubernetes.Interface, ref string) (*inventory.Inventory, []byte, hcl.Diagnostics) {
	ns, name, diags := ParseRef(ref)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Inventory ConfigMap not found",
			Detail:   fmt.Sprintf("There is no ConfigMap %q in namespace %q.%s", name, ns, suggestConfigMap(ctx, client, ns, name)),
		}}
	case err != nil:
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read the inventory ConfigMap",
			Detail:   fmt.Sprintf("Reading ConfigMap %s/%s: %v", ns, name, err),
		}}
	}
	inv, diags := inventory.ParseWindowsInstances(ref, cm.Data)
	text := inventory.WindowsInstancesText(cm.Data)
	if len(cm.BinaryData) > 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "binaryData entries ignored",
			Detail:   fmt.Sprintf("ConfigMap %s/%s has binaryData entries (%s); windows-instances entries belong in data.", ns, name, strings.Join(sortedKeys(cm.BinaryData), ", ")),
		})
	}
	key, newKey, kdiags := privateKey(ctx, client, ns)
	diags = append(diags, kdiags...)
	vars := inv.Groups[inventory.WindowsInstancesGroup].Vars
	if key != nil {
		// No Range: the key is not in the ConfigMap, and it was checked
		// above, so the transport has nothing to point at.
		vars[KeyVar] = inventory.Var{Value: cty.StringVal(string(key)).Mark(sensitive)}
	}
	if newKey != nil {
		vars[NewKeyVar] = inventory.Var{Value: cty.StringVal(string(newKey)).Mark(sensitive)}
	}
	return inv, text, diags
}

// privateKey reads the BYOH private key, and the new one when a rotation
// is under way; nil with a warning when there is none to read.
func privateKey(ctx context.Context, client kubernetes.Interface, ns string) (key, newKey []byte, diags hcl.Diagnostics) {
	where := fmt.Sprintf("Secret %s/%s", ns, KeySecret)
	noKey := func(why string) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagWarning,
			Summary:  "No SSH private key found",
			Detail: fmt.Sprintf("%s, so the hosts get no %s and SSH falls back to the ssh-agent (SSH_AUTH_SOCK) or ~/.ssh's default keys. "+
				"BYOH keeps the key the hosts accept in %s, key %s: kubectl create secret generic %s --from-file=%s=KEYFILE -n %s.",
				why, KeyVar, where, KeySecretKey, KeySecret, KeySecretKey, ns),
		}}
	}
	sec, err := client.CoreV1().Secrets(ns).Get(ctx, KeySecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, noKey(fmt.Sprintf("There is no %s", where))
	case apierrors.IsForbidden(err):
		return nil, nil, noKey(fmt.Sprintf("wsu may not read %s (%v)", where, err))
	case err != nil:
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read the SSH private key",
			Detail:   fmt.Sprintf("Reading %s: %v", where, err),
		}}
	}
	if newKey = sec.Data[NewKeySecretKey]; len(strings.TrimSpace(string(newKey))) == 0 {
		newKey = nil
	} else if d := checkKey(where, NewKeySecretKey, newKey); d != nil {
		return nil, nil, d
	}
	key = sec.Data[KeySecretKey]
	if len(strings.TrimSpace(string(key))) == 0 {
		return nil, newKey, noKey(fmt.Sprintf("%s has no key %s (it has: %s)", where, KeySecretKey, orNone(sortedKeys(sec.Data))))
	}
	if d := checkKey(where, KeySecretKey, key); d != nil {
		return nil, nil, d
	}
	return key, newKey, nil
}

// checkKey refuses what is not a private key; the error never quotes it.
func checkKey(where, name string, key []byte) hcl.Diagnostics {
	var missing *gossh.PassphraseMissingError
	if _, err := gossh.ParsePrivateKey(key); err != nil && !errors.As(err, &missing) {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid SSH private key",
			Detail:   fmt.Sprintf("%s, key %s, is not an OpenSSH or PEM private key: %v.", where, name, err),
		}}
	}
	return nil
}

// suggestConfigMap names the closest ConfigMap in the namespace, when the
// list is readable; a failure to list just gives no suggestion.
func suggestConfigMap(ctx context.Context, client kubernetes.Interface, ns, name string) string {
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	best, bestD := "", -1
	limit := max(2, len(name)/3)
	for _, cm := range list.Items {
		d := levenshtein.Distance(name, cm.Name, nil)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = cm.Name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q (%s%s/%s)?", best, Scheme, ns, best)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "no keys"
	}
	return strings.Join(list, ", ")
}
