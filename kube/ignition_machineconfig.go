package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What current WMCO reads instead of asking the Machine Config Server.
var (
	MachineConfigGVR    = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}
	ControllerConfigGVR = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "controllerconfigs"}
	InfrastructureGVR   = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
)

const (
	RenderedWorkerPrefix    = "rendered-worker-"
	ControllerConfigName    = "machine-config-controller"
	MCONamespace            = "openshift-machine-config-operator"
	NodeBootstrapperSecret  = "node-bootstrapper-token"
	infrastructureName      = "cluster"
	kubeAPIServerServingCA  = "kubeAPIServerServingCAData"
	apiServerInternalURIKey = "apiServerInternalURI"
)

// MachineConfigIgnition is an Ignition read from the cluster, with where it
// came from.
type MachineConfigIgnition struct {
	*Ignition
	// MachineConfig names the rendered worker config used.
	MachineConfig string
	// Server is the API URL written into the bootstrap kubeconfig.
	Server string
}

// IgnitionFromMachineConfig builds what the MCS would serve from the
// cluster's objects, as current WMCO does: the newest rendered-worker
// MachineConfig for the kubelet's flags and files, ControllerConfig
// machine-config-controller for the kubelet CA, and the node-bootstrapper
// service account's token for the bootstrap kubeconfig. server is the API
// URL for that kubeconfig; "" means the Infrastructure's
// apiServerInternalURI, else the URL wsu itself talks to.
func IgnitionFromMachineConfig(ctx context.Context, c *Client, server string) (*MachineConfigIgnition, error) {
	mc, err := newestRenderedWorker(ctx, c)
	if err != nil {
		return nil, err
	}
	raw, found, err := unstructured.NestedFieldNoCopy(mc.Object, "spec", "config")
	if err != nil || !found || raw == nil {
		return nil, fmt.Errorf("MachineConfig %s has no spec.config", mc.GetName())
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("MachineConfig %s: spec.config: %w", mc.GetName(), err)
	}
	ign, err := parseIgnition(data)
	if err != nil {
		return nil, fmt.Errorf("MachineConfig %s: %w", mc.GetName(), err)
	}

	if ign.KubeletCA, err = kubeletCAFromControllerConfig(ctx, c); err != nil {
		return nil, err
	}
	if server == "" {
		if server, err = internalAPIURL(ctx, c); err != nil {
			return nil, err
		}
	}
	secret, err := c.Kube.CoreV1().Secrets(MCONamespace).Get(ctx, NodeBootstrapperSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", MCONamespace, NodeBootstrapperSecret, err)
	}
	token, ca := secret.Data["token"], secret.Data["ca.crt"]
	if len(token) == 0 || len(ca) == 0 {
		return nil, fmt.Errorf("secret %s/%s lacks token or ca.crt (has the token controller filled it in?)", MCONamespace, NodeBootstrapperSecret)
	}
	if ign.BootstrapKubeconfig, err = BootstrapKubeconfig(server, ca, string(token)); err != nil {
		return nil, err
	}
	return &MachineConfigIgnition{Ignition: ign, MachineConfig: mc.GetName(), Server: server}, nil
}

// newestRenderedWorker picks by creation time, as WMCO does: the MCO
// renders a new config for every change and the pool moves to it; ties go
// to the later name so the choice is stable.
func newestRenderedWorker(ctx context.Context, c *Client) (*unstructured.Unstructured, error) {
	list, err := c.Dynamic.Resource(MachineConfigGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing MachineConfigs (is this an OpenShift cluster?): %w", err)
	}
	var workers []*unstructured.Unstructured
	for i := range list.Items {
		mc := &list.Items[i]
		if strings.HasPrefix(mc.GetName(), RenderedWorkerPrefix) {
			if cfg, ok, _ := unstructured.NestedFieldNoCopy(mc.Object, "spec", "config"); ok && cfg != nil {
				workers = append(workers, mc)
			}
		}
	}
	if len(workers) == 0 {
		return nil, fmt.Errorf("no %s* MachineConfig with a spec.config found", RenderedWorkerPrefix)
	}
	sort.Slice(workers, func(i, j int) bool {
		ti, tj := workers[i].GetCreationTimestamp(), workers[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return workers[i].GetName() > workers[j].GetName()
	})
	return workers[0], nil
}

func kubeletCAFromControllerConfig(ctx context.Context, c *Client) ([]byte, error) {
	cc, err := c.Dynamic.Resource(ControllerConfigGVR).Get(ctx, ControllerConfigName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading ControllerConfig %s: %w", ControllerConfigName, err)
	}
	// A []byte field: base64 in JSON.
	s, found, err := unstructured.NestedString(cc.Object, "spec", kubeAPIServerServingCA)
	if err != nil || !found || s == "" {
		return nil, fmt.Errorf("ControllerConfig %s has no spec.%s", ControllerConfigName, kubeAPIServerServingCA)
	}
	ca, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("ControllerConfig %s: spec.%s: %w", ControllerConfigName, kubeAPIServerServingCA, err)
	}
	return ca, nil
}

// internalAPIURL is the URL nodes reach the API server at: api-int, which
// the Infrastructure object records; else the one wsu uses.
func internalAPIURL(ctx context.Context, c *Client) (string, error) {
	infra, err := c.Dynamic.Resource(InfrastructureGVR).Get(ctx, infrastructureName, metav1.GetOptions{})
	switch {
	case err == nil:
		if s, _, _ := unstructured.NestedString(infra.Object, "status", apiServerInternalURIKey); s != "" {
			return s, nil
		}
	case !apierrors.IsNotFound(err): // not OpenShift, or no such object
		return "", fmt.Errorf("reading Infrastructure %s: %w", infrastructureName, err)
	}
	if c.Config == nil || c.Config.Host == "" {
		return "", errors.New("no API server URL: set one, or let wsu read the Infrastructure's apiServerInternalURI")
	}
	return c.Config.Host, nil
}
