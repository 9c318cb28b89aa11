// Package payloadtest builds a payload directory for tests, the demo and
// the benchmarks: every component of a Windows node payload (the
// binaries WMCO puts in C:\k, C:\k\cni and C:\k\containerd), each file a
// TEST STAND-IN binary from test/standin, with manifest.json as
// payload.Load reads it and the stock playbooks use it.
//
// For the simulated host (GOOS linux, the default) the services are Linux
// stand-ins that really run there: kubelet.exe is test/standin/kubelet,
// kube-log-runner.exe test/standin/logrunner, hybrid-overlay-node.exe
// test/standin/hybridoverlay, azure-cloud-node-manager.exe
// test/standin/cloudnodemanager, everything else test/standin/service. For
// Wine (GOOS windows) every file is the Windows build of
// test/standin/service.
//
// Each file is the stand-in binary, then a trailer naming the component and
// its version, then optional padding: bytes after an ELF or PE image do not
// stop it from running, and they make every component's sha256 its own, so
// bumping one component's version changes that file only.
package payloadtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/wsu-project/wsu/payload"
)

// Options choose what Build writes.
type Options struct {
	// GOOS is "linux" (default: stand-ins for agent/platform/sim) or
	// "windows" (the Windows service stand-in for every file, for Wine).
	GOOS string
	// Version is the payload's version (default DefaultVersion).
	Version string
	// Bump gives components a new version (name → version): that file's
	// bytes and sha256 change, nothing else. For upgrade tests.
	Bump map[string]string
	// Sizes pads components to a size in bytes (name → size), e.g.
	// RealisticSizes. A size below the stand-in binary's is an error.
	Sizes map[string]int64
}

// DefaultVersion is the payload version when Options.Version is empty.
const DefaultVersion = "1.0.0"

// Component names, as in the manifest.
const (
	Kubelet         = "kubelet"
	KubeProxy       = "kube-proxy"
	KubeLogRunner   = "kube-log-runner"
	HybridOverlay   = "hybrid-overlay-node"
	CSIProxy        = "csi-proxy"
	WindowsExporter = "windows_exporter"
	WinOverlay      = "win-overlay"
	WinBridge       = "win-bridge"
	HostLocal       = "host-local"
	Containerd      = "containerd"
	ContainerdShim  = "containerd-shim-runhcs-v1"
	// AzureCloudNodeManager is installed as a service only on Azure.
	AzureCloudNodeManager = "azure-cloud-node-manager"
)

const mib = 1 << 20

// RealisticSizes pads the payload to about the size of a real one (~300
// MB), for the benchmarks. The CNI plugins are 5 MiB each, near the real
// ones, since the stand-in binary alone is larger than 4 MiB.
var RealisticSizes = map[string]int64{
	Kubelet:       120 * mib,
	HybridOverlay: 60 * mib,
	KubeProxy:     50 * mib,
	Containerd:    40 * mib,
	CSIProxy:      20 * mib,
	WinOverlay:    5 * mib,
	WinBridge:     5 * mib,
	HostLocal:     5 * mib,
}

// component is one payload file and where it comes from.
type component struct {
	name, dir, service, version string
	runtime                     bool
	standin                     string // package under test/standin on linux
}

// components are the reference's, in its order. containerd_conf.toml is
// not one: check-runtime renders it from a template.
var components = []component{
	{name: Kubelet, dir: `C:\k`, service: "kubelet", version: "v1.31.4", standin: "kubelet"},
	{name: KubeProxy, dir: `C:\k`, service: "kube-proxy", version: "v1.31.4", standin: "service"},
	{name: KubeLogRunner, dir: `C:\k`, service: "kubelet", version: "v1.31.4", standin: "logrunner"},
	{name: HybridOverlay, dir: `C:\k`, service: "hybrid-overlay-node", version: "v4.17.0", standin: "hybridoverlay"},
	{name: CSIProxy, dir: `C:\k`, service: "csi-proxy", version: "v1.1.3", standin: "service"},
	{name: WindowsExporter, dir: `C:\k`, service: "windows_exporter", version: "v0.29.2", standin: "service"},
	{name: WinOverlay, dir: `C:\k\cni`, version: "v1.5.1", standin: "service"},
	{name: WinBridge, dir: `C:\k\cni`, version: "v1.5.1", standin: "service"},
	{name: HostLocal, dir: `C:\k\cni`, version: "v1.5.1", standin: "service"},
	{name: Containerd, dir: `C:\k\containerd`, service: "containerd", version: "v1.7.24", runtime: true, standin: "service"},
	{name: ContainerdShim, dir: `C:\k\containerd`, version: "v0.12.9", runtime: true, standin: "service"},
	// Not in the reference's list: WMCO ships it for Azure.
	{name: AzureCloudNodeManager, dir: `C:\k`, service: "cloud-node-manager", version: "v1.31.1", standin: "cloudnodemanager"},
}

// Names lists the components Build writes, in manifest order.
func Names() []string {
	out := make([]string, len(components))
	for i, c := range components {
		out[i] = c.name
	}
	return out
}

// Build writes the payload into dir (created if needed; files of the same
// names are replaced) and returns its manifest, as payload.Load reads it
// back. The stand-ins are compiled once per process and GOOS.
func Build(ctx context.Context, dir string, opts Options) (*payload.Manifest, error) {
	if opts.GOOS == "" {
		opts.GOOS = "linux"
	}
	if opts.GOOS != "linux" && opts.GOOS != "windows" {
		return nil, fmt.Errorf("payloadtest: GOOS %q: only linux (the simulated host) and windows (Wine)", opts.GOOS)
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	var errs []error
	for name := range opts.Bump {
		if !slices.Contains(Names(), name) {
			errs = append(errs, fmt.Errorf("payloadtest: Bump: no component %q (have %v)", name, Names()))
		}
	}
	for name, size := range opts.Sizes {
		if !slices.Contains(Names(), name) {
			errs = append(errs, fmt.Errorf("payloadtest: Sizes: no component %q (have %v)", name, Names()))
		} else if size < 0 {
			errs = append(errs, fmt.Errorf("payloadtest: Sizes: %s: negative size %d", name, size))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	pkgs := map[string]bool{}
	for _, c := range components {
		pkgs[standinFor(c, opts.GOOS)] = true
	}
	bins, err := standins(ctx, opts.GOOS, pkgs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("payloadtest: %w", err)
	}
	m := &payload.Manifest{Version: opts.Version}
	for _, c := range components {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		version := c.version
		if v, ok := opts.Bump[c.name]; ok {
			version = v
		}
		file := c.name + ".exe"
		sum, err := writeComponent(filepath.Join(dir, file), bins[standinFor(c, opts.GOOS)], c.name, version, opts.Sizes[c.name])
		if err != nil {
			return nil, fmt.Errorf("payloadtest: %s: %w", c.name, err)
		}
		m.Components = append(m.Components, payload.Component{
			Name:        c.name,
			File:        file,
			Version:     version,
			SHA256:      sum,
			Destination: c.dir + `\` + file,
			Service:     c.service,
			Runtime:     c.runtime,
		})
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, payload.ManifestFile), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("payloadtest: %w", err)
	}
	return payload.Load(dir)
}

// standinFor is the test/standin package a component's file is built from.
func standinFor(c component, goos string) string {
	if goos == "windows" {
		return "service" // the only stand-in with a Windows service build
	}
	return c.standin
}

// padBlock is the padding's repeating unit: fixed pseudo-random bytes, so
// files are deterministic but neither sparse nor trivially compressible.
var padBlock = func() []byte {
	b := make([]byte, mib)
	h := sha256.New()
	for i := 0; i < len(b); i += sha256.Size {
		fmt.Fprintf(h, "wsu payloadtest padding %d", i)
		copy(b[i:], h.Sum(nil))
	}
	return b
}()

// trailer follows the stand-in binary in every file: it names the
// component and version, so each file has its own sha256.
func trailer(name, version string) string {
	return fmt.Sprintf("\n\x00wsu-payloadtest TEST STAND-IN component=%s version=%s\n", name, version)
}

// writeComponent writes bin, a trailer and padding up to size (0: none)
// to path, streaming, and returns the file's sha256.
func writeComponent(path, bin, name, version string, size int64) (string, error) {
	src, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return "", err
	}
	mark := trailer(name, version)
	if used := fi.Size() + int64(len(mark)); size > 0 && size < used {
		return "", fmt.Errorf("size %d is below the stand-in binary and trailer's %d bytes", size, used)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	w := io.MultiWriter(tmp, h)
	n, err := io.Copy(w, src)
	if err == nil {
		var k int
		k, err = io.WriteString(w, mark)
		n += int64(k)
	}
	for err == nil && n < size {
		chunk := padBlock[:min(int64(len(padBlock)), size-n)]
		var k int
		k, err = w.Write(chunk)
		n += int64(k)
	}
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Renamed into place: a stand-in running from an earlier payload
		// keeps its own file.
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
