package deploy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestMetricsAuth (issue 26, finding 9): the controller, run as its
// ServiceAccount with the kubernetes overlay's RBAC applied, serves its
// metrics over HTTPS only, to callers the API server authenticates
// (TokenReview) and authorizes (SubjectAccessReview, get on /metrics): a
// token bound to the ClusterRole wsu-metrics-reader scrapes them; no
// token is 401, an unknown one 500, a ServiceAccount without that role
// 403, plain HTTP 400: no metrics without both.
func TestMetricsAuth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := kubetest.Start(t)
	newApplier(t, c.Config).applyAll(ctx, t, readRendered(t, "kubernetes"))
	ns := KubernetesNamespace
	tokens := map[string]string{}
	for _, sa := range []string{"scraper", "nobody"} {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		tokens[sa] = tr.Status.Token
	}
	_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wsu-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.AwaitRBAC(ctx), "the authorizer has seen the bindings")

	addr := freeAddr(t)
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, serviceAccount(c, ns, "wsu-controller"),
			controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: run.InProcess{}},
			controller.ManagerOptions{MetricsAddr: addr, ProbeAddr: "0"})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(time.Minute):
			t.Error("the controller did not stop")
		}
	})

	scrape := func(scheme, token string) (int, string) {
		t.Helper()
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			// The controller's certificate is self-signed: the token is
			// what is checked here.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/metrics", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := scrape("https", tokens["scraper"])
		if code == http.StatusOK {
			assert.Contains(t, body, "controller_runtime_", "the controller's metrics")
			assert.Contains(t, body, `wsu_csrs_total{decision="refused"} 0`, "wsu's own, the CSR counters at 0 from the start (WSUCSRRefused)")
			break
		}
		require.True(t, time.Now().Before(deadline), "the metrics endpoint did not serve the reader: %d %s", code, body)
		time.Sleep(500 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, scheme, token string
		want                int
	}{
		{"no token", "https", "", http.StatusUnauthorized},
		// controller-runtime's filter answers a token the TokenReview
		// rejects with an error as an authentication failure (500).
		{"a token the API server does not know", "https", "not-a-token", http.StatusInternalServerError},
		{"a ServiceAccount without the reader role", "https", tokens["nobody"], http.StatusForbidden},
		{"the reader", "https", tokens["scraper"], http.StatusOK},
		{"plain HTTP, with the reader's token", "http", tokens["scraper"], http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := scrape(tc.scheme, tc.token)
			assert.Equal(t, tc.want, code, body)
			if tc.want != http.StatusOK {
				assert.False(t, strings.Contains(body, "controller_runtime_"), "no metrics without authorization")
			}
		})
	}
}

// freeAddr is a free port on 127.0.0.1.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}
