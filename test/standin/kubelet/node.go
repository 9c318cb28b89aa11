package main

import (
	"context"
	"fmt"
	"log"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

const leaseNamespace = "kube-node-lease"

// initialNode is the Node the kubelet registers (kubelet_node_status.go
// initialNode): default labels, then --node-labels over them, the
// configured taints, and the status.
func initialNode(o *options) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:      o.hostname,
		corev1.LabelOSStable:      "windows",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "windows",
		"beta.kubernetes.io/arch": "amd64",
		corev1.LabelWindowsBuild:  o.windowsBuild,
	}
	for k, v := range o.nodeLabels {
		labels[k] = v
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.nodeName,
			Labels:      labels,
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
	}
	for _, t := range o.kc.RegisterWithTaints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	n.Spec.ProviderID = o.providerID
	if o.cloudProvider == "external" {
		// Until a cloud controller initialises the node.
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	setStatus(n, o, time.Now())
	return n
}

// setStatus fills in what the kubelet reports: addresses, node info,
// capacity, and conditions that say the node is healthy and Ready (there
// is nothing the stand-in could find unhealthy). A condition's transition
// time changes only with its status.
func setStatus(n *corev1.Node, o *options, now time.Time) {
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: o.nodeIP.String()},
		{Type: corev1.NodeHostName, Address: o.hostname},
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem:         "windows",
		Architecture:            "amd64",
		OSImage:                 "Windows Server 2022 Datacenter",
		KernelVersion:           o.windowsBuild,
		KubeletVersion:          o.version,
		ContainerRuntimeVersion: "containerd://0.0.0-wsu-standin",
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             *resource.NewQuantity(o.kc.MaxPods, resource.DecimalSI),
	}
	alloc := corev1.ResourceList{}
	for k, v := range capacity {
		q := v.DeepCopy()
		if r, err := resource.ParseQuantity(o.kc.SystemReserved[string(k)]); err == nil {
			q.Sub(r)
		}
		alloc[k] = q
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, alloc
	hb := metav1.NewTime(now)
	for _, c := range []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status (wsu test stand-in)"},
	} {
		c.LastHeartbeatTime, c.LastTransitionTime = hb, hb
		found := false
		for i := range n.Status.Conditions {
			old := &n.Status.Conditions[i]
			if old.Type != c.Type {
				continue
			}
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			*old, found = c, true
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, c)
		}
	}
}

// register creates the Node as the node itself, keeping one that exists.
func register(ctx context.Context, cs kubernetes.Interface, o *options) error {
	err := retryTransient(ctx, "registering the node", func() error {
		_, err := cs.CoreV1().Nodes().Create(ctx, initialNode(o), metav1.CreateOptions{})
		return err
	})
	switch {
	case err == nil:
		log.Printf("registered node %s", o.nodeName)
	case apierrors.IsAlreadyExists(err):
		log.Printf("node %s is already registered: keeping it", o.nodeName)
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return fmt.Errorf("unable to register node %s with the API server: %w", o.nodeName, err)
	}
	return postStatus(ctx, cs, o)
}

// postStatus writes the node's status; the Node authorizer lets a node
// update only its own.
func postStatus(ctx context.Context, cs kubernetes.Interface, o *options) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setStatus(n, o, time.Now())
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// renewLease keeps the node's lease in kube-node-lease current, as the
// kubelet's heartbeat does besides the status.
func renewLease(ctx context.Context, cs kubernetes.Interface, o *options) error {
	leases := cs.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, o.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err := cs.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		dur := int32(40)
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: o.nodeName, Namespace: leaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &o.nodeName, LeaseDurationSeconds: &dur, RenewTime: &now},
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// heartbeat posts the status and renews the lease every o.heartbeat until
// ctx ends. Failures are logged and retried on the next beat, as the
// kubelet keeps running while the API server is away.
func heartbeat(ctx context.Context, cs kubernetes.Interface, o *options) {
	log.Printf("node %s is Ready; heartbeat every %s", o.nodeName, o.heartbeat)
	t := time.NewTicker(o.heartbeat)
	defer t.Stop()
	for {
		if err := renewLease(ctx, cs, o); err != nil && ctx.Err() == nil {
			log.Printf("renewing lease %s/%s: %v", leaseNamespace, o.nodeName, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := postStatus(ctx, cs, o); err != nil && ctx.Err() == nil {
			log.Printf("updating node %s status: %v", o.nodeName, err)
		}
	}
}
