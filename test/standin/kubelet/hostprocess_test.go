package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestStandinFor(t *testing.T) {
	for image, want := range map[string]string{
		"docker.io/calico/node-windows:v3.30.0":                 "calicowindows",
		"calico/node-windows@sha256:0123":                       "calicowindows",
		"sigwindowstools/kube-proxy:v1.37.1-calico-hostprocess": "kubeproxy",
		"registry.k8s.io/kube-proxy:v1.37.1":                    "kubeproxy",
		"localhost:5000/calico/node:v3.30.0":                    "",
		"mcr.microsoft.com/oss/kubernetes/pause:3.9":            "",
	} {
		assert.Equal(t, want, standinFor(image), image)
	}
}

func TestIsHostProcess(t *testing.T) {
	yes, no := true, false
	hpc := func(v *bool) *corev1.WindowsSecurityContextOptions {
		return &corev1.WindowsSecurityContextOptions{HostProcess: v}
	}
	pod := func(podLevel *bool, containers ...*bool) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{WindowsOptions: hpc(podLevel)}}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{SecurityContext: &corev1.SecurityContext{WindowsOptions: hpc(c)}})
		}
		return p
	}
	assert.True(t, isHostProcess(pod(&yes, nil, nil)), "pod level")
	assert.True(t, isHostProcess(pod(nil, &yes, &yes)), "every container")
	assert.False(t, isHostProcess(pod(nil, &yes, nil)), "one container is not")
	assert.False(t, isHostProcess(pod(&yes, &no)), "a container opts out")
	assert.False(t, isHostProcess(pod(nil, nil)), "neither")
	assert.False(t, isHostProcess(&corev1.Pod{}), "no containers")
}
