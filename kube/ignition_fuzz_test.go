package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseIgnition(f *testing.F) {
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "ignition", "*.json"))
	for _, p := range fixtures {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(ign("2.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:;base64,H4sIAAAA")}, plainUnit))
	f.Add(ign("3.2.0", withFiles(file("/etc/c.conf", "data:,%41")), "[Service]\nEnvironment=A=/etc/c.conf\nExecStart=/k \\\n --cloud-config=$A -v ${B}\n"))
	f.Add([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/kubernetes/kubeconfig","contents":{"source":null,"compression":"gzip"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseIgnition(data)
		if err != nil {
			var ie *IgnitionError
			if got != nil || !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "ignition: ") {
				t.Fatalf("error %T %q with result %v", err, err, got)
			}
			return
		}
		if len(got.BootstrapKubeconfig) == 0 || len(got.KubeletCA) == 0 {
			t.Fatal("parsed without a kubeconfig or kubelet CA")
		}
		if (got.CloudConfigPath == "") != (got.CloudConfigName == "") {
			t.Fatalf("cloud config path %q but name %q", got.CloudConfigPath, got.CloudConfigName)
		}
		if got.CloudConfigName != "" {
			if strings.ContainsAny(got.CloudConfigName, `/\:`) || isReservedName(got.CloudConfigName) {
				t.Fatalf("cloud config name %q is not one Windows file name", got.CloudConfigName)
			}
		}
		if got.KubeletVerbosity != "" && !isDigits(got.KubeletVerbosity) {
			t.Fatalf("verbosity %q", got.KubeletVerbosity)
		}
	})
}
