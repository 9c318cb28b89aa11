package kube

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Where a worker Ignition config keeps what a Windows node needs.
const (
	IgnitionKubeconfigPath = "/etc/kubernetes/kubeconfig"
	IgnitionKubeletCAPath  = "/etc/kubernetes/kubelet-ca.crt"
	kubeletUnitName        = "kubelet.service"
)

// maxIgnitionFile caps a decompressed file: the files wsu reads are a few KiB,
// and a gzip bomb must not take the controller's memory with it.
const maxIgnitionFile = 16 << 20

// Ignition is what a Windows node takes from a worker Ignition config.
type Ignition struct {
	// Version is the config's spec version, e.g. "3.2.0".
	Version string
	// BootstrapKubeconfig is /etc/kubernetes/kubeconfig (C:\k\bootstrap-kubeconfig).
	BootstrapKubeconfig []byte
	// KubeletCA is /etc/kubernetes/kubelet-ca.crt (C:\k\kubelet-ca.crt).
	KubeletCA []byte
	// CloudProvider is the kubelet's --cloud-provider ("" when unset).
	CloudProvider string
	// CloudConfigPath is the kubelet's --cloud-config; CloudConfigName its
	// base name (the node's C:\k\<name>) and CloudConfig that file's content.
	CloudConfigPath string
	CloudConfigName string
	CloudConfig     []byte
	// KubeletVerbosity is the kubelet's --v ("" when unset or not a number
	// after expanding the unit's Environment= settings).
	KubeletVerbosity string
}

// IgnitionError is a config wsu cannot read. Messages never quote file
// contents: they hold credentials.
type IgnitionError struct {
	Path string // the file concerned, if any
	Err  error
}

func (e *IgnitionError) Error() string {
	if e.Path == "" {
		return "ignition: " + e.Err.Error()
	}
	return fmt.Sprintf("ignition: %s: %v", e.Path, e.Err)
}

func (e *IgnitionError) Unwrap() error { return e.Err }

// Errors callers may test for with errors.Is.
var (
	ErrIgnitionNotJSON     = errors.New("not a JSON object")
	ErrIgnitionVersion     = errors.New("unsupported Ignition spec version")
	ErrIgnitionDataURL     = errors.New("bad data URL")
	ErrIgnitionBase64      = errors.New("bad base64")
	ErrIgnitionGzip        = errors.New("bad gzip")
	ErrIgnitionMissingFile = errors.New("missing file")
)

// The parts of Ignition spec 2.x and 3.x wsu reads. Both share these field
// names; 2.x adds storage.files[].filesystem.
type ignConfig struct {
	Ignition struct {
		Version *string `json:"version"`
	} `json:"ignition"`
	Storage struct {
		Files []ignFile `json:"files"`
	} `json:"storage"`
	Systemd struct {
		Units []ignUnit `json:"units"`
	} `json:"systemd"`
}

type ignFile struct {
	Filesystem string `json:"filesystem"`
	Path       string `json:"path"`
	Contents   struct {
		Source      *string `json:"source"`
		Compression *string `json:"compression"`
	} `json:"contents"`
}

type ignUnit struct {
	Name     string  `json:"name"`
	Contents *string `json:"contents"`
	Dropins  []struct {
		Name     string  `json:"name"`
		Contents *string `json:"contents"`
	} `json:"dropins"`
}

var specVersionRE = regexp.MustCompile(`^([0-9]+)\.([0-9]+)\.([0-9]+)(-experimental)?$`)

// supportedSpecs maps a major version to the newest minor wsu knows. The
// fields wsu reads did not change within a major version.
var supportedSpecs = map[int]int{2: 4, 3: 5}

// specMajor checks a spec version and returns its major number.
func specMajor(v string) (int, error) {
	m := specVersionRE.FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("%w %q: not of the form X.Y.Z", ErrIgnitionVersion, v)
	}
	if m[4] != "" {
		return 0, fmt.Errorf("%w %q: experimental specs are not supported", ErrIgnitionVersion, v)
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	newest, ok := supportedSpecs[major]
	if err1 != nil || err2 != nil || !ok || minor > newest {
		return 0, fmt.Errorf("%w %q: wsu reads 2.0-2.4 and 3.0-3.5", ErrIgnitionVersion, v)
	}
	return major, nil
}

// ParseIgnition reads a worker Ignition config as the Machine Config Server
// serves it: the bootstrap kubeconfig and the kubelet CA must be there.
func ParseIgnition(data []byte) (*Ignition, error) {
	ign, err := parseIgnition(data)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{IgnitionKubeconfigPath, ign.BootstrapKubeconfig}, {IgnitionKubeletCAPath, ign.KubeletCA}} {
		if len(f.data) == 0 {
			return nil, &IgnitionError{Path: f.path, Err: fmt.Errorf("%w: the config has no (or an empty) %s; is this a worker config from the Machine Config Server?", ErrIgnitionMissingFile, f.path)}
		}
	}
	return ign, nil
}

// parseIgnition extracts whatever the config holds. A rendered MachineConfig
// has no kubeconfig (the MCS adds it when serving), so the caller decides what
// must be present.
func parseIgnition(data []byte) (*Ignition, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, &IgnitionError{Err: fmt.Errorf("%w: the config is empty", ErrIgnitionNotJSON)}
	}
	if data[0] != '{' || !json.Valid(data) {
		return nil, &IgnitionError{Err: fmt.Errorf("%w: the config does not parse as JSON", ErrIgnitionNotJSON)}
	}
	var cfg ignConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, &IgnitionError{Err: fmt.Errorf("%w: %v", ErrIgnitionNotJSON, jsonErr(err))}
	}
	if cfg.Ignition.Version == nil {
		return nil, &IgnitionError{Err: fmt.Errorf("%w: ignition.version is missing", ErrIgnitionVersion)}
	}
	version := *cfg.Ignition.Version
	major, err := specMajor(version)
	if err != nil {
		return nil, &IgnitionError{Err: err}
	}
	ign := &Ignition{Version: version}

	files, err := indexFiles(cfg.Storage.Files, major)
	if err != nil {
		return nil, err
	}
	if ign.BootstrapKubeconfig, err = files.read(IgnitionKubeconfigPath); err != nil {
		return nil, err
	}
	if ign.KubeletCA, err = files.read(IgnitionKubeletCAPath); err != nil {
		return nil, err
	}

	unit, err := kubeletUnit(cfg.Systemd.Units)
	if err != nil {
		return nil, err
	}
	flags := kubeletFlags(unit)
	ign.CloudProvider = flags["cloud-provider"]
	if v := flags["v"]; isDigits(v) {
		ign.KubeletVerbosity = v
	}
	if p := flags["cloud-config"]; p != "" {
		name, err := cloudConfigName(p)
		if err != nil {
			return nil, &IgnitionError{Path: kubeletUnitName, Err: err}
		}
		content, err := files.read(p)
		if err != nil {
			return nil, err
		}
		if content == nil {
			return nil, &IgnitionError{Path: p, Err: fmt.Errorf("%w: the kubelet's --cloud-config names %s but the config does not contain it", ErrIgnitionMissingFile, p)}
		}
		ign.CloudConfigPath, ign.CloudConfigName, ign.CloudConfig = p, name, content
	}
	return ign, nil
}

// jsonErr describes a structural mismatch without echoing input.
func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must not be a JSON %s", te.Field, te.Value)
	}
	return err.Error()
}

// ignFiles indexes the root-filesystem files by path.
type ignFiles struct {
	major  int
	byPath map[string]ignFile
}

func indexFiles(files []ignFile, major int) (ignFiles, error) {
	idx := ignFiles{major: major, byPath: make(map[string]ignFile, len(files))}
	for _, f := range files {
		// Spec 2.x writes to named filesystems; only "root" is the node's /.
		if major == 2 && f.Filesystem != "" && f.Filesystem != "root" {
			continue
		}
		if _, dup := idx.byPath[f.Path]; dup {
			// Spec 3 forbids duplicates; in 2.x the last would win, but which
			// kubeconfig a node joins with must not be a guess.
			return idx, &IgnitionError{Path: f.Path, Err: errors.New("the path appears more than once in storage.files")}
		}
		idx.byPath[f.Path] = f
	}
	return idx, nil
}

// read decodes a file's contents; nil when the config has no such file.
func (idx ignFiles) read(p string) ([]byte, error) {
	f, ok := idx.byPath[p]
	if !ok {
		return nil, nil
	}
	if f.Contents.Source == nil {
		return []byte{}, nil // spec 3: no source is an empty file
	}
	data, err := decodeDataURL(*f.Contents.Source)
	if err != nil {
		return nil, &IgnitionError{Path: p, Err: err}
	}
	compression := ""
	if f.Contents.Compression != nil {
		compression = *f.Contents.Compression
	}
	switch {
	case compression == "gzip":
	case compression != "":
		return nil, &IgnitionError{Path: p, Err: fmt.Errorf("unsupported compression %q (only gzip is defined)", compression)}
	case idx.major == 2 && isGzip(data):
		// Spec 2 configs served by older MCSs carry gzip payloads without
		// saying so; the files read here are text, so the magic is telling.
	default:
		return data, nil
	}
	out, err := gunzip(data)
	if err != nil {
		return nil, &IgnitionError{Path: p, Err: err}
	}
	return out, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIgnitionGzip, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxIgnitionFile+1))
	if err == nil {
		err = zr.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIgnitionGzip, err)
	}
	if len(out) > maxIgnitionFile {
		return nil, fmt.Errorf("%w: decompresses to more than %d MiB", ErrIgnitionGzip, maxIgnitionFile>>20)
	}
	return out, nil
}

// decodeDataURL decodes an RFC 2397 data URL: data:[<mediatype>][;base64],<data>.
// Other schemes (https, s3, tftp) would make wsu fetch from wherever the
// config points, so they are refused.
func decodeDataURL(src string) ([]byte, error) {
	if len(src) < 5 || !strings.EqualFold(src[:5], "data:") {
		scheme, _, ok := strings.Cut(src, ":")
		if !ok || strings.ContainsAny(scheme, "/?#") {
			return nil, fmt.Errorf("%w: the source is not a URL", ErrIgnitionDataURL)
		}
		return nil, fmt.Errorf("%w: the source is a %q URL; wsu reads only inline data: URLs", ErrIgnitionDataURL, truncate(scheme, 16))
	}
	header, payload, ok := strings.Cut(src[5:], ",")
	if !ok {
		return nil, fmt.Errorf("%w: no comma between the media type and the data", ErrIgnitionDataURL)
	}
	params := strings.Split(header, ";")
	isBase64 := len(params) > 1 && strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64")
	data, err := url.PathUnescape(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: bad percent-encoding: %v", ErrIgnitionDataURL, err)
	}
	if !isBase64 {
		return []byte(data), nil
	}
	// Base64 in a URL may be wrapped or unpadded; neither changes the bytes.
	data = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, data)
	out, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		var err2 error
		if out, err2 = base64.RawStdEncoding.DecodeString(data); err2 != nil {
			return nil, fmt.Errorf("%w: %v", ErrIgnitionBase64, err)
		}
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// kubeletUnit returns kubelet.service's unit text followed by its drop-ins in
// the order systemd applies them (by name).
func kubeletUnit(units []ignUnit) ([]string, error) {
	for _, u := range units {
		if u.Name != kubeletUnitName {
			continue
		}
		var texts []string
		if u.Contents != nil {
			texts = append(texts, *u.Contents)
		}
		dropins := slices.Clone(u.Dropins)
		slices.SortStableFunc(dropins, func(a, b struct {
			Name     string  `json:"name"`
			Contents *string `json:"contents"`
		}) int {
			return strings.Compare(a.Name, b.Name)
		})
		for _, d := range dropins {
			if d.Contents != nil {
				texts = append(texts, *d.Contents)
			}
		}
		return texts, nil
	}
	return nil, &IgnitionError{Path: kubeletUnitName, Err: fmt.Errorf("%w: the config has no %s unit; is this a worker config?", ErrIgnitionMissingFile, kubeletUnitName)}
}

// kubeletFlags returns the --name=value flags of the effective ExecStart of
// the unit, with ${VAR} and $VAR expanded from its Environment= settings.
func kubeletFlags(texts []string) map[string]string {
	env := map[string]string{}
	var exec string
	for _, text := range texts {
		for _, kv := range serviceSettings(text) {
			switch kv[0] {
			case "Environment":
				for _, word := range splitWords(kv[1]) {
					if k, v, ok := strings.Cut(word, "="); ok {
						env[k] = v
					}
				}
			case "ExecStart":
				// An empty ExecStart= in a drop-in resets the command; the
				// kubelet is a simple service, so the last one runs.
				exec = kv[1]
			}
		}
	}
	words := splitWords(exec)
	flags := map[string]string{}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !hasValue {
			// pflag also takes "--name value".
			if i+1 >= len(words) || strings.HasPrefix(words[i+1], "-") {
				continue
			}
			i++
			value = words[i]
		}
		flags[name] = expandEnv(value, env)
	}
	return flags
}

// serviceSettings returns the key=value settings of a unit's [Service]
// section, with continuation lines joined and comments dropped.
func serviceSettings(text string) [][2]string {
	var out [][2]string
	section := ""
	var line strings.Builder
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if line.Len() == 0 && (strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";")) {
			continue
		}
		if strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			line.WriteString(strings.TrimSuffix(l, `\`))
			line.WriteByte(' ')
			continue
		}
		line.WriteString(l)
		full := line.String()
		line.Reset()
		if strings.HasPrefix(full, "[") && strings.HasSuffix(full, "]") {
			section = full
			continue
		}
		if section != "[Service]" {
			continue
		}
		if k, v, ok := strings.Cut(full, "="); ok {
			out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return out
}

// splitWords splits a command line or Environment= value the way systemd
// does: on whitespace, with "double" and 'single' quotes grouping.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

var envRefRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expandEnv replaces known variables; unknown ones (from an EnvironmentFile
// wsu cannot read) stay as written.
func expandEnv(s string, env map[string]string) string {
	return envRefRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := strings.Trim(ref, "${}")
		if v, ok := env[name]; ok {
			return v
		}
		return ref
	})
}

func isDigits(s string) bool {
	if s == "" || len(s) > 4 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// cloudConfigName is the node-side file name for the kubelet's cloud config:
// it becomes C:\k\<name>, so it must be one plain Windows file name.
func cloudConfigName(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("--cloud-config=%q is not an absolute path", truncate(p, 64))
	}
	name := path.Base(p)
	if name == "/" || name == "." || name == ".." || strings.HasSuffix(p, "/") ||
		strings.ContainsAny(name, `<>:"\|?*`) || strings.TrimRight(name, ". ") != name ||
		strings.IndexFunc(name, func(r rune) bool { return r < 0x20 }) >= 0 || isReservedName(name) {
		return "", fmt.Errorf("--cloud-config=%q does not end in a file name usable on Windows", truncate(p, 64))
	}
	return name, nil
}

// isReservedName is true for DOS device names, which Windows treats as
// devices whatever the extension (NUL.conf is NUL).
func isReservedName(name string) bool {
	stem, _, _ := strings.Cut(strings.ToUpper(name), ".")
	switch stem {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	return len(stem) == 4 && (strings.HasPrefix(stem, "COM") || strings.HasPrefix(stem, "LPT")) && stem[3] >= '1' && stem[3] <= '9'
}
