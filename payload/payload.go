// Package payload describes the Windows node payload (kubelet, kube-proxy,
// hybrid-overlay, containerd, CNI plugins...) by a manifest, verifies a
// payload directory against it, and fetches missing components from their
// source URLs with checksum verification.
package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/wsu-project/wsu/host/osfs"
)

// ManifestFile is the manifest's name inside a payload directory.
const ManifestFile = "manifest.json"

// Manifest lists a payload's components.
type Manifest struct {
	// Version is the payload's version: the node's version annotation.
	Version    string      `json:"version"`
	Components []Component `json:"components"`
}

// Component is one file of the payload.
type Component struct {
	Name    string `json:"name"`    // e.g. "kubelet"
	File    string `json:"file"`    // file name inside the payload directory
	Version string `json:"version"` // the component's own version
	SHA256  string `json:"sha256"`  // hex
	// Destination is the absolute Windows path on the node.
	Destination string `json:"destination"`
	// Service is the Windows service whose binary this is, if any: the
	// playbooks stop and start it to replace the file.
	Service string `json:"service,omitempty"`
	// Source is where `wsu payload fetch` downloads the file from.
	Source string `json:"source,omitempty"`
	// Runtime marks the container runtime's files, which check-runtime
	// installs before everything else.
	Runtime bool `json:"runtime,omitempty"`
}

var (
	hexSHA   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	winAbs   = regexp.MustCompile(`^[A-Za-z]:\\`)
	safeFile = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// Load reads and checks dir's manifest.
func Load(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the payload manifest: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	m := &Manifest{}
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Check validates the manifest's own content.
func (m *Manifest) Check() error {
	var errs []error
	if m.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	if len(m.Components) == 0 {
		errs = append(errs, errors.New("no components"))
	}
	names, files, dests := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, c := range m.Components {
		where := fmt.Sprintf("component %d (%s)", i+1, c.Name)
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("component %d: name is empty", i+1))
		case names[c.Name]:
			errs = append(errs, fmt.Errorf("%s: duplicate name", where))
		}
		names[c.Name] = true
		if !safeFile.MatchString(c.File) {
			errs = append(errs, fmt.Errorf("%s: file %q must be a plain file name", where, c.File))
		} else if files[c.File] {
			errs = append(errs, fmt.Errorf("%s: file %q is listed twice", where, c.File))
		}
		files[c.File] = true
		if !hexSHA.MatchString(c.SHA256) {
			errs = append(errs, fmt.Errorf("%s: sha256 %q is not 64 lower-case hex digits", where, c.SHA256))
		}
		if !winAbs.MatchString(c.Destination) || strings.Contains(c.Destination, "..") {
			errs = append(errs, fmt.Errorf("%s: destination %q must be an absolute Windows path", where, c.Destination))
		} else if dests[strings.ToLower(c.Destination)] {
			errs = append(errs, fmt.Errorf("%s: destination %q is listed twice", where, c.Destination))
		}
		dests[strings.ToLower(c.Destination)] = true
	}
	return errors.Join(errs...)
}

// Problem is one way a payload directory differs from its manifest.
type Problem struct {
	Component string
	Reason    string
}

func (p Problem) String() string { return p.Component + ": " + p.Reason }

// Verify hashes every component in dir and reports what is missing or
// differs. It streams each file; nothing is loaded whole.
func Verify(dir string, m *Manifest) ([]Problem, error) {
	var out []Problem
	for _, c := range m.Components {
		sum, err := osfs.FileSHA256(filepath.Join(dir, c.File))
		switch {
		case errors.Is(err, os.ErrNotExist):
			out = append(out, Problem{c.Name, "missing " + c.File})
		case err != nil:
			return nil, err
		case sum != c.SHA256:
			out = append(out, Problem{c.Name, fmt.Sprintf("sha256 %s, manifest says %s", sum, c.SHA256)})
		}
	}
	return out, nil
}

// Progress receives download progress: bytes so far and the total (-1 when
// the server does not say).
type Progress func(component string, done, total int64)

// Fetch downloads every component whose file is missing or wrong from its
// source URL, verifying its sha256 before moving it into place: a failed or
// corrupt download never replaces a file.
func Fetch(ctx context.Context, client *http.Client, dir string, m *Manifest, progress Progress) error {
	problems, err := Verify(dir, m)
	if err != nil {
		return err
	}
	need := map[string]bool{}
	for _, p := range problems {
		need[p.Component] = true
	}
	var errs []error
	for _, c := range m.Components {
		if !need[c.Name] {
			continue
		}
		if c.Source == "" {
			errs = append(errs, fmt.Errorf("%s: needs fetching but has no source URL", c.Name))
			continue
		}
		if err := fetchOne(ctx, client, dir, c, progress); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

func fetchOne(ctx context.Context, client *http.Client, dir string, c Component, progress Progress) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Source, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", c.Source, resp.Status)
	}
	tmp, err := os.CreateTemp(dir, ".fetch-"+c.File+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	var done int64
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := tmp.Write(buf[:n]); err != nil {
				tmp.Close()
				return err
			}
			h.Write(buf[:n])
			done += int64(n)
			if progress != nil {
				progress(c.Name, done, resp.ContentLength)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			tmp.Close()
			return rerr
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != c.SHA256 {
		return fmt.Errorf("downloaded sha256 %s does not match the manifest's %s; the file was not kept", sum, c.SHA256)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, c.File))
}

// Names returns the component names, sorted.
func (m *Manifest) Names() []string {
	out := make([]string, 0, len(m.Components))
	for _, c := range m.Components {
		out = append(out, c.Name)
	}
	sort.Strings(out)
	return out
}

// Copy copies a payload from src into dst (an init container filling an
// emptyDir from a payload image): every component the manifest lists,
// hashed while it is copied and kept only when its sha256 matches, then the
// manifest itself, last, so a dst with a manifest is complete. Files in src
// that the manifest does not list are not copied.
func Copy(src, dst string, m *Manifest) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, c := range m.Components {
		if err := copyVerified(filepath.Join(src, c.File), dst, c.File, c.SHA256); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(src, ManifestFile))
	if err != nil {
		return err
	}
	return writeAtomic(dst, ManifestFile, raw)
}

// copyVerified copies src to dst/name through a temporary file, renamed
// into place only when its sha256 is want.
func copyVerified(src, dst, name, want string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dst, ".copy-"+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != want {
		return fmt.Errorf("sha256 %s, manifest says %s; not copied", sum, want)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dst, name))
}

func writeAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".copy-"+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}
