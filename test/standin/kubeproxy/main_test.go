package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestParseArgs(t *testing.T) {
	t.Setenv("NODE_NAME", "win-1")
	t.Setenv("KUBE_NETWORK", "")
	t.Setenv("CONTAINER_SANDBOX_MOUNT_POINT", "")
	cfg := parseArgs([]string{`--kubeconfig=C:\k\config`, "--hostname-override", "win-2", "--v=4", "--enable-dsr=true"})
	assert.Equal(t, config{kubeconfig: `C:\k\config`, node: "win-2", network: "Calico"}, cfg, "unknown flags ignored, default network")
	t.Setenv("CONTAINER_SANDBOX_MOUNT_POINT", `C:\C\x`)
	t.Setenv("KUBE_NETWORK", "vxlan0")
	cfg = parseArgs(nil)
	assert.Equal(t, config{node: "win-1", network: "vxlan0", hostProcess: true}, cfg)
}

// TestRefused: an identity the API server refuses to list Services is a
// failure the stand-in reports and exits on, not something it retries.
func TestRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,
			"message":"services is forbidden: User \"system:node:win-1\" cannot list resource \"services\""}`))
	}))
	defer srv.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	t.Setenv("WSU_SIM_ROOT", "")
	t.Setenv("CONTAINER_SANDBOX_MOUNT_POINT", "")
	err := run(context.Background(), []string{"--kubeconfig=" + path})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed to list/watch services")
	assert.Contains(t, err.Error(), "forbidden")
	_ = os.Remove(path)
}
