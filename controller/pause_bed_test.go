//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestGlobalPause: paused: "true" in the wsu-controller ConfigMap stops
// every run while the controller keeps watching: an instance created then
// shows phase Paused and nothing runs for it; setting the key to false
// wakes it (no other change) and it joins; paused again, a deleted
// instance is not removed until the pause ends.
func TestGlobalPause(t *testing.T) {
	t.Parallel()
	cluster, admin := escalationBed(t)
	ctx := context.Background()
	runs := &inSyncRunner{}
	settings := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: controller.SettingsConfigMap, Namespace: ns},
		Data:       map[string]string{controller.PausedKey: "true"},
	}
	require.NoError(t, admin.Create(ctx, settings))
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: runs})
	setPause := func(v string) {
		t.Helper()
		cur := &corev1.ConfigMap{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(settings), cur))
		cur.Data[controller.PausedKey] = v
		require.NoError(t, admin.Update(ctx, cur))
	}
	wi := instanceNamed("win-1", nil)
	require.NoError(t, admin.Create(ctx, wi))
	get := func() *wsuv1.WindowsInstance {
		cur := &wsuv1.WindowsInstance{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(wi), cur)
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		return cur
	}
	eventually(t, time.Minute, "phase Paused", func() (bool, string) {
		cur := get()
		return cur.Status.Phase == wsuv1.PhasePaused, describe(cur)
	})
	assert.Empty(t, runs.all("win-1"), "nothing runs while paused")

	setPause("false")
	eventually(t, time.Minute, "joined once the pause ends", func() (bool, string) {
		cur := get()
		return meta.IsStatusConditionTrue(cur.Status.Conditions, wsuv1.ConditionJoined) && cur.Status.Phase == wsuv1.PhaseJoined, describe(cur)
	})

	setPause("true")
	eventually(t, time.Minute, "phase Paused again", func() (bool, string) {
		cur := get()
		return cur.Status.Phase == wsuv1.PhasePaused, describe(cur)
	})
	before := len(runs.all("win-1"))
	require.NoError(t, admin.Delete(ctx, get()))
	eventually(t, 30*time.Second, "a ControllerPaused event: the removal waits", anyEvent(t, cluster, "win-1", controller.ReasonControllerPaused))
	cur := get()
	require.NotNil(t, cur, "a deleted instance waits on its finalizer")
	assert.Equal(t, before, len(runs.all("win-1")), "no run while paused")
	assert.Zero(t, runs.removals("win-1"), "no removal while paused")

	setPause("false")
	eventually(t, time.Minute, "removed once the pause ends", func() (bool, string) {
		cur := get()
		return cur == nil, fmt.Sprintf("%s, %d removals", describe(cur), runs.removals("win-1"))
	})
	assert.Equal(t, 1, runs.removals("win-1"))
}

func anyEvent(t *testing.T, cluster *kubetest.Cluster, name, reason string) func() (bool, string) {
	return func() (bool, string) {
		list, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	}
}
