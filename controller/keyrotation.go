package controller

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/playbooks"
)

// Key rotation: the controller cannot read a Secret's old content once it
// changed, and a host that knows only the old key is lost if the
// controller switches first. So a rotation keeps both keys in the key
// Secret: the admin adds the new key as KEY.new beside KEY, the controller
// runs rotate-key on each instance logged in with the key it records as in
// use (status.identity.keyFingerprint), and from then on logs in with
// whichever key in the Secret has that fingerprint; the admin swaps the
// keys once every instance shows KeyRotated=True. The controller never
// writes the Secret. Under approval Manual a rotation is planned first and
// waits for its hash to be approved, as any change. A rotation that
// stopped after the old key left the host, before the new fingerprint was
// recorded, is caught at the next login: a run the host refuses is tried
// with the Secret's other key, which is recorded when the host takes it
// (tryOtherKey).

// Reasons of the KeyRotated condition.
const (
	ReasonKeyRotated        = "KeyRotated"
	ReasonKeyInUse          = "KeyInUse"
	ReasonKeyRotationNeeded = "KeyRotationPending"
	ReasonKeyRotationFailed = "KeyRotationFailed"
)

// NewKeySuffix names the rotation's new key in the key Secret: KEY.new.
const NewKeySuffix = ".new"

// instanceKeys are the keys of an instance's key Secret.
type instanceKeys struct {
	secret              string
	current, next       string // next: KEY.new, "" when no rotation is under way
	currentFP, nextFP   string
	currentKey, nextKey string // the data keys
}

// readKeys reads the instance's key Secret.
func (r *InstanceReconciler) readKeys(ctx context.Context, wi *wsuv1.WindowsInstance) (instanceKeys, error) {
	ref := wsuv1.SecretKeyRef{Name: kubeinv.KeySecret, Key: kubeinv.KeySecretKey}
	if wi.Spec.KeySecretRef != nil {
		ref = *wi.Spec.KeySecretRef
	}
	where := keySecretOf(wi, r.Options.BYOHNamespace)
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, where, sec); err != nil {
		return instanceKeys{}, fmt.Errorf("reading the SSH key Secret %s: %w", where, err)
	}
	if r.Options.RunMode == run.ModeJob && where.Namespace != wi.Namespace {
		return instanceKeys{}, fmt.Errorf("the SSH key Secret %s is in another namespace than the instance, and a Job can mount only its own namespace's Secrets: give the instance a spec.keySecretRef in %s, or run in process", where, wi.Namespace)
	}
	k := instanceKeys{secret: ref.Name, currentKey: ref.Key, nextKey: ref.Key + NewKeySuffix,
		current: string(sec.Data[ref.Key]), next: string(sec.Data[ref.Key+NewKeySuffix])}
	if k.current == "" {
		return instanceKeys{}, fmt.Errorf("the Secret %s has no key %q", ref.Name, ref.Key)
	}
	var err error
	if k.currentFP, err = fingerprint(k.current); err != nil {
		return instanceKeys{}, fmt.Errorf("the Secret %s, key %q: %w", ref.Name, ref.Key, err)
	}
	if k.next != "" {
		if k.nextFP, err = fingerprint(k.next); err != nil {
			return instanceKeys{}, fmt.Errorf("the Secret %s, key %q: %w", ref.Name, k.nextKey, err)
		}
	}
	return k, nil
}

// fingerprint is a private key's SHA256 fingerprint; errors never quote it.
func fingerprint(key string) (string, error) {
	s, err := gossh.ParsePrivateKey([]byte(key))
	if err != nil {
		return "", fmt.Errorf("not an unencrypted OpenSSH or PEM private key: %v", err)
	}
	return gossh.FingerprintSHA256(s.PublicKey()), nil
}

// inUse is the key to log in with: KEY.new once the instance moved to it
// (its fingerprint recorded), else KEY.
func (k instanceKeys) inUse(recorded string) string {
	if k.next != "" && recorded == k.nextFP {
		return k.next
	}
	return k.current
}

// inUseKey is the data key of the key inUse returns.
func (k instanceKeys) inUseKey(recorded string) string {
	if k.next != "" && recorded == k.nextFP {
		return k.nextKey
	}
	return k.currentKey
}

// pending reports whether a rotation waits for this instance.
func (k instanceKeys) pending(recorded string) bool {
	return k.next != "" && recorded != k.nextFP
}

// rotatedToNext reports whether the instance was rotated to the Secret's
// .new key, which is still there: its KeyRotated reason then stays until
// the admin makes that key the Secret's key, instead of turning into
// KeyInUse at the next reconcile (which made the rotation's outcome
// visible only until then).
func rotatedToNext(wi *wsuv1.WindowsInstance, keys instanceKeys) bool {
	c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
	return keys.next != "" && wi.Status.Identity.KeyFingerprint == keys.nextFP &&
		c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonKeyRotated
}

// rotateKeyIfPending runs rotate-key on the instance when its key Secret
// holds a new key the host has not been moved to, and records the key in
// use otherwise. done: converge stops here (a rotation ran, failed or
// waits for the rollout limit).
func (r *InstanceReconciler) rotateKeyIfPending(ctx context.Context, orig, wi *wsuv1.WindowsInstance) (res ctrl.Result, done bool, err error) {
	keys, err := r.readKeys(ctx, wi)
	if err != nil {
		return ctrl.Result{}, false, nil // converge reports the Secret's problem
	}
	if isMachineInstance(wi) {
		return r.machineKeys(ctx, orig, wi, keys) // machinereplace.go
	}
	recorded := wi.Status.Identity.KeyFingerprint
	if !keys.pending(recorded) {
		if recorded == "" || (recorded != keys.currentFP && recorded != keys.nextFP) {
			// First run, or the admin swapped the keys: the key in use is KEY.
			wi.Status.Identity.KeyFingerprint = keys.currentFP
		}
		if !rotatedToNext(wi, keys) {
			setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionTrue, ReasonKeyInUse,
				fmt.Sprintf("logging in with %s", wi.Status.Identity.KeyFingerprint))
		}
		return ctrl.Result{}, false, nil
	}
	if recorded == "" {
		wi.Status.Identity.KeyFingerprint = keys.currentFP
	}
	if wait := r.awaitingRotationApproval(wi, keys); wait > 0 {
		res, err := r.done(ctx, orig, wi, wsuv1.PhaseAwaitingApproval, wait)
		return res, true, err
	}
	setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionFalse, ReasonKeyRotationNeeded,
		fmt.Sprintf("the Secret %s holds a new key %s (%s): rotate-key moves this host to it", keys.secret, keys.nextKey, keys.nextFP))
	ok, err := r.takeSlot(ctx, wi) // rollout.go
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if !ok {
		res, err := r.done(ctx, orig, wi, wi.Status.Phase, r.slotRecheck())
		return res, true, err
	}
	defer r.rollouts.release(wi)
	// KeyRotationPending is shown while the rotation runs.
	r.setStatusPhase(ctx, orig, wi, wi.Status.Phase)
	orig = wi.DeepCopy()
	rr, err := r.runRequest(ctx, wi, "wsu:"+rotateKeyPlaybook)
	if err != nil {
		res, err := r.failed(ctx, orig, wi, ReasonInvalidInput, err.Error(), false)
		return res, true, err
	}
	if rr.Vars, rr.Secrets.Vars, err = onlyDeclared(rotateKeyPlaybook, rr.Vars, rr.Secrets.Vars); err != nil {
		return ctrl.Result{}, true, err
	}
	for _, h := range rr.Inventory.Hosts {
		h.Vars[kubeinv.NewKeyVar] = inventory.Var{Value: cty.StringVal(keys.next).Mark(engine.Sensitive)}
	}
	rr.Secrets.NewKey = run.SecretItem{Secret: keys.secret, Key: keys.nextKey}
	if wi.Spec.Approval == wsuv1.ApprovalManual {
		if res, done, err := r.planRotation(ctx, orig, wi, &rr, keys); done {
			return res, true, err
		}
	}
	out := r.run(ctx, wi, &rr, engine.ModeApply)
	r.recordReach(wi, out)
	if interrupted(ctx, out) {
		return resumeAfter(out), true, nil
	}
	if out.Failed {
		rotationFailed(wi, keys, out)
		res, err := r.failed(ctx, orig, wi, ReasonKeyRotationFailed, out.Message, out.Unreachable)
		return res, true, err
	}
	return r.rotated(ctx, orig, wi, keys)
}

// rotated records a host moved to the Secret's new key.
func (r *InstanceReconciler) rotated(ctx context.Context, orig, wi *wsuv1.WindowsInstance, keys instanceKeys) (res ctrl.Result, done bool, err error) {
	wi.Status.Identity.KeyFingerprint = keys.nextFP
	setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionTrue, ReasonKeyRotated,
		fmt.Sprintf("the host accepts %s (%s) and no longer the previous key", keys.nextKey, keys.nextFP))
	r.event(wi, corev1.EventTypeNormal, ReasonKeyRotated, "the host now accepts only the new key %s from %s", keys.nextFP, keys.secret)
	meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionDegraded)
	wi.Status.Failures, wi.Status.NextRetry = 0, nil
	phase := wi.Status.Phase
	if (phase == wsuv1.PhaseAwaitingApproval || phase == wsuv1.PhaseFailed) && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) {
		phase = wsuv1.PhaseJoined // the rotation was what waited or failed
	}
	res, err = r.done(ctx, orig, wi, phase, 0)
	if err != nil {
		// The host now refuses the old key: its fingerprint must be
		// recorded, or the next pass would log in with the old one.
		err = r.recordKeyInUse(ctx, wi)
	}
	return res, true, err
}

// planRotation plans a Manual instance's rotation and stops it there
// unless an admin approved that plan's hash, as any other change: the plan
// (lastPlan, playbook wsu:rotate-key.hcl) is what `wsu approve` shows.
// Approved, rr is held to it. done: the rotation stops here (awaiting
// approval, failed, or found already done).
func (r *InstanceReconciler) planRotation(ctx context.Context, orig, wi *wsuv1.WindowsInstance, rr *run.Request, keys instanceKeys) (res ctrl.Result, done bool, err error) {
	plan := r.run(ctx, wi, rr, engine.ModePlan)
	if interrupted(ctx, plan) {
		return resumeAfter(plan), true, nil
	}
	r.recordReach(wi, plan)
	if wi.Status.Identity.KeyFingerprint == keys.nextFP {
		return r.rotated(ctx, orig, wi, keys) // the host took only the new key (tryOtherKey)
	}
	if plan.Failed {
		rotationFailed(wi, keys, plan)
		res, err := r.failed(ctx, orig, wi, ReasonKeyRotationFailed, plan.Message, plan.Unreachable)
		return res, true, err
	}
	r.recordPlan(wi, rr.Playbook, plan)
	if !r.approved(wi, plan) {
		res, err := r.awaitApproval(ctx, orig, wi, plan)
		return res, true, err
	}
	rr.HoldTo(plan)
	return ctrl.Result{}, false, nil
}

// awaitingRotationApproval is how long a Manual instance whose rotation
// plan (for the Secret's current new key) awaits approval waits before it
// is planned again: wakes between (Node heartbeats) cost no run.
func (r *InstanceReconciler) awaitingRotationApproval(wi *wsuv1.WindowsInstance, keys instanceKeys) time.Duration {
	c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
	if wi.Spec.Approval != wsuv1.ApprovalManual || c == nil || c.Reason != ReasonKeyRotationNeeded || !strings.Contains(c.Message, keys.nextFP) {
		return 0
	}
	return r.awaitingApproval(wi, "wsu:"+rotateKeyPlaybook)
}

// tryOtherKey: a run the host refused to log in to (out), while the key
// Secret holds two keys, is run again with the other one. A rotation that
// stopped after rotate-key removed the old key from the host, before the
// new key's fingerprint was recorded, would otherwise leave the instance
// logging in with a key the host no longer takes, for ever. When the
// host takes the other key, it is recorded as the key in use
// (status.identity.keyFingerprint, the KeyRotated condition, an event) and
// rr keeps it for the rest of the pass; when it refuses both, out stands.
func (r *InstanceReconciler) tryOtherKey(ctx context.Context, wi *wsuv1.WindowsInstance, rr *run.Request, mode engine.Mode, out run.Outcome) run.Outcome {
	if !loginRefused(out) || ctx.Err() != nil {
		return out
	}
	keys, err := r.readKeys(ctx, wi)
	if err != nil || keys.next == "" {
		return out
	}
	other, item, fp := keys.next, run.SecretItem{Secret: keys.secret, Key: keys.nextKey}, keys.nextFP
	if rr.Secrets.Key.Key == keys.nextKey {
		other, item, fp = keys.current, run.SecretItem{Secret: keys.secret, Key: keys.currentKey}, keys.currentFP
	}
	was := setLoginKey(rr, other, item)
	second := r.runOnce(ctx, *rr, mode)
	if second.Pending {
		return second // in a Job: a later pass reads its result
	}
	if loginRefused(second) || second.Unreachable {
		setLoginKey(rr, was.key, was.item)
		return out
	}
	log.FromContext(ctx).Info("the host refused the recorded key and took the other", "key", item.Key, "fingerprint", fp)
	wi.Status.Identity.KeyFingerprint = fp
	if fp == keys.nextFP {
		setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionTrue, ReasonKeyRotated,
			fmt.Sprintf("the host refused the previous key and accepts %s (%s): a rotation ended without being recorded", keys.nextKey, keys.nextFP))
	} else {
		setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionTrue, ReasonKeyInUse, fmt.Sprintf("logging in with %s", fp))
	}
	r.event(wi, corev1.EventTypeNormal, ReasonKeyRotated, "the host refused the recorded key and accepts %s (%s) from %s: logging in with it from now on", item.Key, fp, keys.secret)
	return second
}

// loginKey is the key a run logs in with, and where it is.
type loginKey struct {
	key  string
	item run.SecretItem
}

// setLoginKey makes rr log in with key (item in its Secret), returning
// the one it had.
func setLoginKey(rr *run.Request, key string, item run.SecretItem) loginKey {
	was := loginKey{item: rr.Secrets.Key}
	for _, h := range rr.Inventory.Hosts {
		if v, ok := h.Vars[kubeinv.KeyVar]; ok && was.key == "" {
			s, _ := v.Value.Unmark()
			was.key = s.AsString()
		}
		h.Vars[kubeinv.KeyVar] = inventory.Var{Value: cty.StringVal(key).Mark(engine.Sensitive)}
	}
	rr.Secrets.Key = item
	return was
}

// loginRefused says the run's host refused to authenticate it.
func loginRefused(out run.Outcome) bool { return out.Unreachable && out.LoginRefused }

// recordKeyInUse writes the key fingerprint and KeyRotated condition of wi
// onto the instance as it is now, retrying on conflicts.
func (r *InstanceReconciler) recordKeyInUse(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	fp := wi.Status.Identity.KeyFingerprint
	cond := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &wsuv1.WindowsInstance{}
		if err := reader.Get(ctx, client.ObjectKeyFromObject(wi), cur); err != nil {
			return err
		}
		orig := cur.DeepCopy()
		cur.Status.Identity.KeyFingerprint = fp
		if cond != nil {
			meta.SetStatusCondition(&cur.Status.Conditions, *cond)
		}
		return r.Client.Status().Patch(ctx, cur, statusPatch(orig))
	})
}

// rotationFailed records a rotation that did not happen: the host could
// not be reached, or it refused the new key. Either way it keeps (and wsu
// keeps logging in with) the key in use until a rotation succeeds.
func rotationFailed(wi *wsuv1.WindowsInstance, keys instanceKeys, out run.Outcome) {
	if out.Unreachable {
		setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionFalse, ReasonUnreachable,
			fmt.Sprintf("rotate-key could not reach the host; it is moved to %s (%s) once it can be: %s", keys.nextKey, keys.nextFP, run.Truncate(out.Message, 800)))
		return
	}
	setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionFalse, ReasonKeyRotationFailed,
		"rotate-key failed; the host keeps the key in use: "+run.Truncate(out.Message, 900))
}

// rotateKeyPlaybook is the stock playbook a rotation runs.
const rotateKeyPlaybook = "rotate-key.hcl"

// onlyDeclared keeps the -var values (NAME=VALUE) that set a variable the
// stock playbook declares: the controller's and an instance's vars are the
// join's settings (cluster_flavour, payload_dir...), which rotate-key does
// not declare and the engine refuses as -var values; its own
// (authorized_keys_file) pass.
func onlyDeclared(stock string, vars []string, fromSecrets map[int]run.SecretItem) ([]string, map[int]run.SecretItem, error) {
	src, err := fs.ReadFile(playbooks.FS, stock)
	if err != nil {
		return nil, nil, err
	}
	f, diags := hclsyntax.ParseConfig(src, stock, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	declared := map[string]bool{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "variable" && len(b.Labels) == 1 {
			declared[b.Labels[0]] = true
		}
	}
	var out []string
	var outSecrets map[int]run.SecretItem
	for i, v := range vars {
		if name, _, _ := strings.Cut(v, "="); !declared[strings.TrimSpace(name)] {
			continue
		}
		if item, ok := fromSecrets[i]; ok {
			if outSecrets == nil {
				outSecrets = map[int]run.SecretItem{}
			}
			outSecrets[len(out)] = item
		}
		out = append(out, v)
	}
	return out, outSecrets, nil
}
