package funcs

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/wsu-project/wsu/limits"
)

// fileSource resolves and reads the files that file functions refer to,
// either from the OS filesystem or from an fs.FS holding embedded playbooks.
//
// A confined source (roots set) reads files on disk only inside its
// roots, whatever the path or a symbolic link says: a site playbook the
// controller took from a ConfigMap reads its own files and the payload,
// never the pod's ServiceAccount token.
type fileSource struct {
	baseDir string
	fsys    fs.FS
	roots   []string
	onRead  ReadHook
}

func newFileSource(f FileAccess) *fileSource {
	s := &fileSource{baseDir: f.Dir, fsys: f.FS, onRead: f.OnRead}
	for _, r := range f.Roots {
		s.roots = append(s.roots, filepath.Clean(r))
	}
	return s
}

// ErrOutsideRoots is the error of a confined file function given a path
// outside the directories it may read.
var ErrOutsideRoots = errors.New("a playbook from a ConfigMap reads only its own files and the payload")

// Inside returns the root of roots that holds the OS path p and p relative
// to it, or ok false.
func Inside(roots []string, p string) (root, rel string, ok bool) {
	for _, r := range roots {
		rel, err := filepath.Rel(r, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return r, rel, true
		}
	}
	return "", "", false
}

// confined resolves p on disk inside one of s.roots.
func (s *fileSource) confined(p string) (root, rel string, err error) {
	abs := p
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		return "", "", fmt.Errorf("%s: %w", p, ErrOutsideRoots)
	}
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(s.baseDir, abs)
	}
	abs = filepath.Clean(abs)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real // a link is judged by where it leads (os.Root holds to it too)
	}
	root, rel, ok := Inside(s.roots, abs)
	if !ok {
		return "", "", fmt.Errorf("%s is outside %s: %w", p, strings.Join(s.roots, ", "), ErrOutsideRoots)
	}
	return root, rel, nil
}

// inRoot resolves p inside its root and calls do with the root opened
// (os.Root refuses a symbolic link that leads out of it) and p relative
// to it; it returns the name p resolved to.
func (s *fileSource) inRoot(p string, do func(root *os.Root, rel string) error) (string, error) {
	dir, rel, err := s.confined(p)
	if err != nil {
		return p, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return p, err
	}
	defer root.Close()
	return filepath.Join(dir, rel), do(root, rel)
}

func (s *fileSource) readConfined(p string) (data []byte, name string, err error) {
	name, err = s.inRoot(p, func(root *os.Root, rel string) (err error) {
		data, err = root.ReadFile(rel)
		return err
	})
	return data, name, err
}

func (s *fileSource) statConfined(p string) (info fs.FileInfo, name string, err error) {
	name, err = s.inRoot(p, func(root *os.Root, rel string) (err error) {
		info, err = root.Stat(rel)
		return err
	})
	return info, name, err
}

// resolve turns a path given to a file function into the name to open: an OS
// path when reading from disk, or a slash path inside fsys.
//
// In an embedded playbook a relative path names a file beside it (its
// templates); an absolute or ~ path is the user's own file on disk (the
// payload manifest given as a variable), so it is read from disk.
func (s *fileSource) resolve(p string) (string, error) {
	if s.fsys == nil || onDisk(p) {
		if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("cannot expand %q: %w", p, err)
			}
			p = filepath.Join(home, p[1:])
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.baseDir, p)
		}
		return filepath.Clean(p), nil
	}

	var name string
	if strings.HasPrefix(p, "/") {
		name = strings.TrimLeft(path.Clean(p), "/")
	} else {
		base := strings.TrimLeft(path.Clean(filepath.ToSlash(s.baseDir)), "/")
		name = path.Join(base, p)
	}
	if name == "" {
		name = "."
	}
	if !fs.ValidPath(name) {
		return "", fmt.Errorf("path %q is outside the embedded playbook filesystem", p)
	}
	return name, nil
}

// read returns the contents of the file at p and its resolved name.
func (s *fileSource) read(p string) ([]byte, string, error) {
	if len(s.roots) > 0 && (s.fsys == nil || onDisk(p)) {
		data, name, err := s.readConfined(p)
		return s.readDone(p, data, name, err)
	}
	name, err := s.resolve(p)
	if err != nil {
		return nil, "", err
	}
	var data []byte
	if s.fsys == nil || onDisk(p) {
		data, err = os.ReadFile(name)
	} else {
		data, err = fs.ReadFile(s.fsys, name)
	}
	return s.readDone(p, data, name, err)
}

// readDone reports a read: its error, or its content to the read hook.
func (s *fileSource) readDone(p string, data []byte, name string, err error) ([]byte, string, error) {
	if err != nil {
		if errors.Is(err, ErrOutsideRoots) {
			return nil, name, err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, name, fmt.Errorf("no file exists at %s", name)
		}
		return nil, name, fmt.Errorf("failed to read %s: %w", name, err)
	}
	if s.onRead != nil {
		s.onRead(name, data)
	}
	return data, name, nil
}

// stat describes the file at p without following it into its contents.
func (s *fileSource) stat(p string) (fs.FileInfo, string, error) {
	if len(s.roots) > 0 && (s.fsys == nil || onDisk(p)) {
		return s.statConfined(p)
	}
	name, err := s.resolve(p)
	if err != nil {
		return nil, "", err
	}
	var info fs.FileInfo
	if s.fsys == nil || onDisk(p) {
		info, err = os.Stat(name)
	} else {
		info, err = fs.Stat(s.fsys, name)
	}
	return info, name, err
}

// onDisk reports whether p names a file on the OS filesystem even from an
// embedded playbook: an absolute path or one under the home directory.
func onDisk(p string) bool {
	return filepath.IsAbs(p) || p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`)
}

func pathParam() []function.Parameter {
	return []function.Parameter{{Name: "path", Type: cty.String}}
}

func makeFileFunc(files *fileSource) function.Function {
	return function.New(&function.Spec{
		Description: "Reads the file at path and returns its contents, which must be UTF-8 text.",
		Params:      pathParam(),
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			data, name, err := files.read(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			if !utf8.Valid(data) {
				return cty.UnknownVal(cty.String), fmt.Errorf("contents of %s are not valid UTF-8; use filebase64 to read binary files", name)
			}
			return cty.StringVal(string(data)), nil
		},
	})
}

func makeFileBase64Func(files *fileSource) function.Function {
	return function.New(&function.Spec{
		Description: "Reads the file at path and returns its contents encoded as standard Base64.",
		Params:      pathParam(),
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			data, _, err := files.read(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			return cty.StringVal(base64.StdEncoding.EncodeToString(data)), nil
		},
	})
}

func makeFileSHA256Func(files *fileSource) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the hexadecimal SHA-256 digest of the contents of the file at path.",
		Params:      pathParam(),
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			data, _, err := files.read(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			return cty.StringVal(hexDigest(sha256.New, data)), nil
		},
	})
}

func makeFileExistsFunc(files *fileSource) function.Function {
	return function.New(&function.Spec{
		Description: "Reports whether a regular file exists at path.",
		Params:      pathParam(),
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			info, name, err := files.stat(args[0].AsString())
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return cty.False, nil
			case err != nil:
				return cty.UnknownVal(cty.Bool), fmt.Errorf("failed to stat %s: %w", args[0].AsString(), err)
			case !info.Mode().IsRegular():
				return cty.UnknownVal(cty.Bool), fmt.Errorf("%s is not a regular file (mode %s)", name, info.Mode())
			}
			return cty.True, nil
		},
	})
}

// makeTemplateFileFunc returns templatefile(path, vars), which renders the
// HCL template in the file at path with the attributes of vars as variables
// and funcs as the available functions.
func makeTemplateFileFunc(files *fileSource, funcs map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Description: "Renders the template file at path using the given variables.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "vars", Type: cty.DynamicPseudoType},
		},
		Type: function.StaticReturnType(cty.DynamicPseudoType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			vars := args[1]
			if ty := vars.Type(); !(ty.IsObjectType() || ty.IsMapType()) {
				return cty.DynamicVal, function.NewArgErrorf(1, "vars must be an object or map, not %s", ty.FriendlyName())
			}
			if !vars.IsKnown() {
				return cty.DynamicVal, nil
			}
			varMap := make(map[string]cty.Value, vars.LengthInt())
			for it := vars.ElementIterator(); it.Next(); {
				k, v := it.Element()
				name := k.AsString()
				if !hclsyntax.ValidIdentifier(name) {
					return cty.DynamicVal, function.NewArgErrorf(1, "invalid template variable name %q: must start with a letter, followed by letters, digits, underscores or dashes", name)
				}
				varMap[name] = v
			}

			src, name, err := files.read(args[0].AsString())
			if err != nil {
				return cty.DynamicVal, err
			}
			if diags := limits.CheckTemplate(src, name, hcl.InitialPos); diags.HasErrors() {
				return cty.DynamicVal, fmt.Errorf("refusing template: %s", diags.Error())
			}
			expr, diags := hclsyntax.ParseTemplate(src, name, hcl.InitialPos)
			if diags.HasErrors() {
				return cty.DynamicVal, fmt.Errorf("failed to parse template: %s", diags.Error())
			}
			for _, tr := range expr.Variables() {
				if _, ok := varMap[tr.RootName()]; !ok {
					return cty.DynamicVal, fmt.Errorf("%s: vars map does not contain key %q", tr.SourceRange(), tr.RootName())
				}
			}
			val, diags := expr.Value(&hcl.EvalContext{Variables: varMap, Functions: funcs})
			if diags.HasErrors() {
				return cty.DynamicVal, fmt.Errorf("failed to render template: %s", diags.Error())
			}
			return val, nil
		},
	})
}

var basenameFunc = function.New(&function.Spec{
	Description: "Returns the last element of a filesystem path.",
	Params:      pathParam(),
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(filepath.Base(args[0].AsString())), nil
	},
})

var dirnameFunc = function.New(&function.Spec{
	Description: "Returns all but the last element of a filesystem path.",
	Params:      pathParam(),
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(filepath.Dir(args[0].AsString())), nil
	},
})
