package kube

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ignition", name))
	require.NoError(t, err)
	return b
}

func TestParseIgnitionFixtures(t *testing.T) {
	kubeconfig := readFixture(t, "want-kubeconfig")
	ca := readFixture(t, "want-kubelet-ca.crt")
	aws := readFixture(t, "want-cloud-aws.conf")
	vsphere := readFixture(t, "want-cloud-vsphere.conf")
	tests := []struct {
		fixture string
		want    Ignition
	}{
		{"spec2.2.json", Ignition{
			Version: "2.2.0", BootstrapKubeconfig: kubeconfig, KubeletCA: ca,
			CloudProvider: "aws", CloudConfigPath: "/etc/kubernetes/cloud.conf", CloudConfigName: "cloud.conf",
			CloudConfig: aws, KubeletVerbosity: "3",
		}},
		{"spec2.4.json", Ignition{
			Version: "2.4.0", BootstrapKubeconfig: kubeconfig, KubeletCA: ca, KubeletVerbosity: "2",
		}},
		{"spec3.1.json", Ignition{
			Version: "3.1.0", BootstrapKubeconfig: kubeconfig, KubeletCA: ca,
			CloudProvider: "vsphere", CloudConfigPath: "/etc/kubernetes/cloud.conf", CloudConfigName: "cloud.conf",
			CloudConfig: vsphere, KubeletVerbosity: "4",
		}},
		{"spec3.2.json", Ignition{
			Version: "3.2.0", BootstrapKubeconfig: kubeconfig, KubeletCA: ca,
			CloudProvider: "external", CloudConfigPath: "/etc/kubernetes/cloud.conf", CloudConfigName: "cloud.conf",
			CloudConfig: aws, KubeletVerbosity: "5",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			got, err := ParseIgnition(readFixture(t, tt.fixture))
			require.NoError(t, err)
			assert.Equal(t, tt.want, *got)
		})
	}
}

func TestParseIgnitionMachineConfigNeedsNoKubeconfig(t *testing.T) {
	data := readFixture(t, "machineconfig-3.2.json")
	_, err := ParseIgnition(data)
	require.ErrorIs(t, err, ErrIgnitionMissingFile)
	assert.Contains(t, err.Error(), IgnitionKubeconfigPath)

	got, err := parseIgnition(data)
	require.NoError(t, err)
	assert.Empty(t, got.BootstrapKubeconfig)
	assert.Equal(t, "vsphere", got.CloudProvider)
	assert.Equal(t, readFixture(t, "want-cloud-vsphere.conf"), got.CloudConfig)
}

// ign builds a config around files and a kubelet unit.
func ign(version string, files []map[string]any, kubeletUnit string) []byte {
	cfg := map[string]any{
		"ignition": map[string]any{"version": version},
		"storage":  map[string]any{"files": files},
		"systemd":  map[string]any{"units": []map[string]any{{"name": "kubelet.service", "contents": kubeletUnit}}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

func file(path, source string, extra ...string) map[string]any {
	f := map[string]any{"path": path, "contents": map[string]any{"source": source}}
	if len(extra) > 0 {
		f["contents"].(map[string]any)["compression"] = extra[0]
	}
	return f
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

const plainUnit = "[Service]\nExecStart=/usr/bin/kubelet --v=2\n"

var validFiles = []map[string]any{
	file(IgnitionKubeconfigPath, "data:,kubeconfig"),
	file(IgnitionKubeletCAPath, "data:,ca"),
}

func withFiles(extra ...map[string]any) []map[string]any {
	return append(append([]map[string]any{}, validFiles...), extra...)
}

func TestParseIgnitionErrors(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		is      error
		message string
	}{
		{"empty", nil, ErrIgnitionNotJSON, "empty"},
		{"yaml", []byte("ignition:\n  version: 3.2.0\n"), ErrIgnitionNotJSON, "does not parse as JSON"},
		{"truncated JSON", []byte(`{"ignition": {"version": "3.2.0"`), ErrIgnitionNotJSON, "does not parse as JSON"},
		{"JSON array", []byte(`[1]`), ErrIgnitionNotJSON, "JSON"},
		{"wrong field type", []byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":7}]}}`), ErrIgnitionNotJSON, "storage.files.path must not be a JSON number"},
		{"no version", []byte(`{"storage":{}}`), ErrIgnitionVersion, "ignition.version is missing"},
		{"spec 1", ign("1.0.0", validFiles, plainUnit), ErrIgnitionVersion, `"1.0.0"`},
		{"spec 4", ign("4.0.0", validFiles, plainUnit), ErrIgnitionVersion, "wsu reads 2.0-2.4 and 3.0-3.5"},
		{"spec 2.5", ign("2.5.0", validFiles, plainUnit), ErrIgnitionVersion, `"2.5.0"`},
		{"experimental", ign("3.6.0-experimental", validFiles, plainUnit), ErrIgnitionVersion, "experimental"},
		{"garbage version", ign("three", validFiles, plainUnit), ErrIgnitionVersion, "X.Y.Z"},
		{"https source", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "https://evil.example.com/kc")}, plainUnit), ErrIgnitionDataURL, `"https" URL`},
		{"no comma", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:text/plain;base64")}, plainUnit), ErrIgnitionDataURL, "no comma"},
		{"bad percent", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:,token%zz")}, plainUnit), ErrIgnitionDataURL, "percent-encoding"},
		{"bad base64", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:;base64,!!!!")}, plainUnit), ErrIgnitionBase64, IgnitionKubeconfigPath},
		{"bad gzip", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:,not-gzip", "gzip")}, plainUnit), ErrIgnitionGzip, IgnitionKubeconfigPath},
		{"truncated gzip", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:;base64,"+base64.StdEncoding.EncodeToString(gz("kubeconfig")[:15]), "gzip")}, plainUnit), ErrIgnitionGzip, ""},
		{"spec 2 gzip magic but corrupt", ign("2.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:;base64,H4sIAAAA")}, plainUnit), ErrIgnitionGzip, ""},
		{"unknown compression", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:,x", "xz")}, plainUnit), nil, `unsupported compression "xz"`},
		{"missing kubeconfig", ign("3.2.0", []map[string]any{file(IgnitionKubeletCAPath, "data:,ca")}, plainUnit), ErrIgnitionMissingFile, IgnitionKubeconfigPath},
		{"empty kubeconfig", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:,"), file(IgnitionKubeletCAPath, "data:,ca")}, plainUnit), ErrIgnitionMissingFile, IgnitionKubeconfigPath},
		{"missing kubelet CA", ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, "data:,kc")}, plainUnit), ErrIgnitionMissingFile, IgnitionKubeletCAPath},
		{"duplicate kubeconfig", ign("3.2.0", withFiles(file(IgnitionKubeconfigPath, "data:,other")), plainUnit), nil, "more than once"},
		{"no kubelet unit", []byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/kubernetes/kubeconfig","contents":{"source":"data:,x"}}]}}`), ErrIgnitionMissingFile, "kubelet.service"},
		{"cloud config not in the config", ign("3.2.0", validFiles, "[Service]\nExecStart=/kubelet --cloud-config=/etc/kubernetes/cloud.conf\n"), ErrIgnitionMissingFile, "/etc/kubernetes/cloud.conf"},
		{"cloud config relative", ign("3.2.0", validFiles, "[Service]\nExecStart=/kubelet --cloud-config=cloud.conf\n"), nil, "not an absolute path"},
		{"cloud config dot-dot", ign("3.2.0", withFiles(file("/etc/..", "data:,x")), "[Service]\nExecStart=/kubelet --cloud-config=/etc/..\n"), nil, "usable on Windows"},
		{"cloud config device name", ign("3.2.0", withFiles(file("/etc/nul.conf", "data:,x")), "[Service]\nExecStart=/kubelet --cloud-config=/etc/nul.conf\n"), nil, "usable on Windows"},
		{"cloud config with backslash", ign("3.2.0", withFiles(file(`/etc/a\..\b`, "data:,x")), "[Service]\nExecStart=/kubelet --cloud-config=/etc/a\\..\\b\n"), nil, "usable on Windows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIgnition(tt.data)
			require.Error(t, err)
			assert.Nil(t, got)
			var ie *IgnitionError
			assert.True(t, errors.As(err, &ie), "error type %T", err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			assert.Contains(t, err.Error(), tt.message)
			assert.True(t, strings.HasPrefix(err.Error(), "ignition: "), err.Error())
		})
	}
}

// Errors must never carry file contents: a kubeconfig holds a token.
func TestParseIgnitionErrorsHideContents(t *testing.T) {
	const secret = "s3cr3t-token-value"
	for _, src := range []string{
		"data:;base64," + secret + "!",
		"data:," + secret + "%zz",
		"data:," + secret, // with compression gzip
		"https://" + secret + ".example.com/",
		secret + "://x",
	} {
		_, err := ParseIgnition(ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, src, "gzip")}, plainUnit))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret, src)
	}
}

func TestParseIgnitionIgnoresFilesItDoesNotRead(t *testing.T) {
	data := ign("3.2.0", withFiles(
		file("/etc/motd", "s3://bucket/motd"),
		file("/etc/other", "data:;base64,!!!", "zstd"),
	), plainUnit)
	got, err := ParseIgnition(data)
	require.NoError(t, err)
	assert.Equal(t, "kubeconfig", string(got.BootstrapKubeconfig))
}

func TestDecodeDataURL(t *testing.T) {
	payload := "line 1\nline 2: 100% é,;+/="
	tests := []struct {
		name, src, want string
	}{
		{"plain", "data:,hello", "hello"},
		{"percent", "data:," + url.PathEscape(payload), payload},
		{"percent with media type", "data:text/plain;charset=utf-8," + url.QueryEscape("a b"), "a+b"},
		{"base64", "data:;base64," + base64.StdEncoding.EncodeToString([]byte(payload)), payload},
		{"base64 media type", "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(payload)), payload},
		{"base64 upper case", "DATA:;BASE64,aGk=", "hi"},
		{"base64 unpadded", "data:;base64,aGk", "hi"},
		{"base64 percent-encoded padding", "data:;base64,aGk%3D", "hi"},
		{"base64 wrapped", "data:;base64,aG\nk=", "hi"},
		{"empty", "data:,", ""},
		{"comma in data", "data:,a,b", "a,b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeDataURL(tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestKubeletFlags(t *testing.T) {
	tests := []struct {
		name  string
		units []string
		want  map[string]string
	}{
		{"equals", []string{"[Service]\nExecStart=/k --cloud-provider=aws --v=2\n"}, map[string]string{"cloud-provider": "aws", "v": "2"}},
		{"separate value", []string{"[Service]\nExecStart=/k --cloud-provider aws -v 4 --windows-service\n"}, map[string]string{"cloud-provider": "aws", "v": "4"}},
		{"quoted", []string{"[Service]\nExecStart=/k \"--cloud-config=/etc/a b.conf\"\n"}, map[string]string{"cloud-config": "/etc/a b.conf"}},
		{"continuations", []string{"[Service]\nExecStart=/k \\\n  --v=6 \\\n  --cloud-provider=gce\n"}, map[string]string{"v": "6", "cloud-provider": "gce"}},
		{"last flag wins", []string{"[Service]\nExecStart=/k --v=1 --v=7\n"}, map[string]string{"v": "7"}},
		{"other sections ignored", []string{"[Unit]\nExecStart=/k --v=9\n[Service]\nExecStart=/k --v=1\n"}, map[string]string{"v": "1"}},
		{"comments ignored", []string{"[Service]\n# ExecStart=/k --v=9\nExecStart=/k --v=1\n"}, map[string]string{"v": "1"}},
		{"drop-in replaces ExecStart", []string{"[Service]\nExecStart=/k --v=1\n", "[Service]\nExecStart=\nExecStart=/k --v=8\n"}, map[string]string{"v": "8"}},
		{"env expanded", []string{"[Service]\nEnvironment=LVL=3 \"CP=azure\"\nExecStart=/k --v=${LVL} --cloud-provider=$CP\n"}, map[string]string{"v": "3", "cloud-provider": "azure"}},
		{"env unknown", []string{"[Service]\nExecStart=/k --v=${FROM_FILE}\n"}, map[string]string{"v": "${FROM_FILE}"}},
		{"CRLF", []string{"[Service]\r\nExecStart=/k --v=2\r\n"}, map[string]string{"v": "2"}},
		{"no ExecStart", []string{"[Service]\nType=notify\n"}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, kubeletFlags(tt.units))
		})
	}
}

func TestKubeletVerbosityMustBeANumber(t *testing.T) {
	for unit, want := range map[string]string{
		"[Service]\nExecStart=/k --v=${FROM_FILE}\n": "",
		"[Service]\nExecStart=/k --v=high\n":         "",
		"[Service]\nExecStart=/k --v=10\n":           "10",
		"[Service]\nExecStart=/k\n":                  "",
	} {
		got, err := ParseIgnition(ign("3.2.0", validFiles, unit))
		require.NoError(t, err)
		assert.Equal(t, want, got.KubeletVerbosity, unit)
	}
}

func TestGzipBombIsRefused(t *testing.T) {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range maxIgnitionFile>>20 + 1 {
		w.Write(zeros)
	}
	w.Close()
	src := "data:;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
	_, err := ParseIgnition(ign("3.2.0", []map[string]any{file(IgnitionKubeconfigPath, src, "gzip")}, plainUnit))
	require.ErrorIs(t, err, ErrIgnitionGzip)
	assert.Contains(t, err.Error(), "more than 16 MiB")
}
