package playbooks_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules/all"
	kubemod "github.com/wsu-project/wsu/modules/kube"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/test/kubetest"
)

// testCA signs serving certificates as OpenShift's service CA does.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "openshift-service-serving-signer (test)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return testCA{cert: cert, key: key}
}

// serving is a PEM certificate for the Service's names and its PEM key.
func (ca testCA) serving(svc, ns string) (crt, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: svc + "." + ns + ".svc"},
		DNSNames:  []string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), nil
}

// standInServiceCA is a stand-in for OpenShift's service-ca operator: it
// watches the namespace's Services and, for one annotated with
// service.beta.openshift.io/serving-cert-secret-name, writes that
// kubernetes.io/tls Secret with a certificate from ca. It stops with ctx;
// wait returns its error.
func standInServiceCA(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, ca testCA) (wait func() error) {
	t.Helper()
	w, err := cs.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer w.Stop()
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			name := ""
			if ok {
				name = svc.Annotations[kubemod.ServingCertAnnotation]
			}
			if name == "" {
				continue
			}
			crt, key, err := ca.serving(svc.Name, ns)
			if err == nil {
				_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
					Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{})
			}
			if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				runErr = err
				return
			}
		}
	}()
	return func() error { wg.Wait(); return runErr }
}

// TestWindowsExporterServiceCA: on OpenShift (serving_cert_secret, join's
// default there), the windows-exporter Service asks the service CA for a
// certificate, and the node's windows_exporter serves TLS with the one the
// service CA (a stand-in here) wrote: its certificate and key on the host,
// verifiable with the CA for windows-exporter.<namespace>.svc, the
// exporter started with --web.config.file, and the key never in an event.
func TestWindowsExporterServiceCA(t *testing.T) {
	const ns, node = "openshift-windows-machine-config-operator", "win-1"
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, c.EnsureNamespace(ctx, ns))
	_, err := c.CreateNode(ctx, node, nil)
	require.NoError(t, err)
	ca := newTestCA(t)
	wait := standInServiceCA(ctx, t, c.Client, ns, ca)

	loader := playbook.NewLoader(all.Schemas(), playbooks.FS)
	pb, diags := loader.Load("wsu:windows-exporter.hcl")
	require.False(t, diags.HasErrors(), diags.Error())
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nwin-1\n"))
	require.False(t, diags.HasErrors(), diags.Error())
	simHost, err := sim.New(filepath.Join(t.TempDir(), "win-1"), sim.Options{Hostname: "WIN-1", IPv4: "10.0.0.5"})
	require.NoError(t, err)
	require.NoError(t, simHost.MkdirAll(ctx, `C:\k`, 0o755))
	require.NoError(t, simHost.WriteFile(ctx, `C:\k\windows_exporter.exe`, strings.NewReader("exporter"), 0o755))
	var mu sync.Mutex
	var events []string
	res := engine.Run(ctx, engine.Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs: engine.Inputs{Vars: []string{"kubeconfig=" + c.Kubeconfig, "node_name=" + node, "node_ip=10.0.0.5",
			"namespace=" + ns, "serving_cert_secret=windows-exporter-tls"}},
		Mode:      engine.ModeApply,
		Registry:  all.Registry(all.Options{Clusters: kube.NewCache(kube.Defaults{})}),
		Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) { return simHost, nil }),
		Hooks: engine.HooksFunc(func(e engine.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Change != nil {
				text, err := json.Marshal(e.Change)
				assert.NoError(t, err)
				events = append(events, string(text))
			}
			for _, d := range e.Diagnostics {
				events = append(events, d.Summary+": "+d.Detail)
			}
		}),
		Sources: loader.Sources(),
	})
	require.False(t, res.Failed(), "apply: %s %s", res.Diagnostics, res.SetupDiagnostics)
	cancel()
	require.NoError(t, wait(), "the stand-in service CA")

	svc, err := c.Client.CoreV1().Services(ns).Get(context.Background(), "windows-exporter", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "windows-exporter-tls", svc.Annotations[kubemod.ServingCertAnnotation], "the Service asks the service CA")
	sec, err := c.Client.CoreV1().Secrets(ns).Get(context.Background(), "windows-exporter-tls", metav1.GetOptions{})
	require.NoError(t, err)

	bg := context.Background()
	crt, err := simHost.ReadFile(bg, `C:\k\tls\windows-exporter.crt`, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, string(sec.Data[corev1.TLSCertKey]), string(crt), "the service CA's certificate on the node")
	key, err := simHost.ReadFile(bg, `C:\k\tls\windows-exporter.key`, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, string(sec.Data[corev1.TLSPrivateKeyKey]), string(key), "its key on the node")
	block, _ := pem.Decode(crt)
	require.NotNil(t, block)
	leaf, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "windows-exporter." + ns + ".svc"})
	assert.NoError(t, err, "Prometheus verifies it with the service CA and the ServiceMonitor's serverName")

	info, err := simHost.QueryService(bg, "windows_exporter")
	require.NoError(t, err)
	assert.Equal(t, []string{"--web.config.file", `C:\k\tls\windows-exporter-webconfig.yaml`}, info.Config.Args[len(info.Config.Args)-2:])
	wc, err := simHost.ReadFile(bg, `C:\k\tls\windows-exporter-webconfig.yaml`, 1<<20)
	require.NoError(t, err)
	assert.Contains(t, string(wc), "cert_file:")

	keyBlock, _ := pem.Decode(key)
	require.NotNil(t, keyBlock)
	keyBody := strings.Split(string(key), "\n")[1] // the key's first base64 line
	for _, e := range events {
		assert.NotContains(t, e, keyBody, "an event shows the key")
	}
}
