// Package funcs provides the function table available to wsu playbook
// expressions. The names and behaviour follow the functions Terraform users
// already know, plus a couple of helpers for managing Windows hosts.
package funcs

import (
	"io/fs"
	"sort"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Table returns every function available to playbook expressions. A
// function called with a sensitive argument does not quote it when it
// fails: its error message is replaced (hideSensitiveErrors). baseDir is
// the directory of the playbook file being evaluated; relative paths given to
// file functions resolve against it. fsys, when non-nil, is used instead of
// the OS filesystem (playbooks embedded in the binary); paths are then slash
// paths inside fsys relative to baseDir.
func Table(baseDir string, fsys fs.FS) map[string]function.Function {
	return TableFor(FileAccess{Dir: baseDir, FS: fsys})
}

// FileAccess is what the file functions of a playbook may read.
type FileAccess struct {
	// Dir is the playbook's directory: relative paths resolve against it.
	Dir string
	// FS, when non-nil, holds the playbook (embedded stock playbooks):
	// relative paths are slash paths inside it; absolute ones are on disk.
	FS fs.FS
	// Roots, when set, confine every read on disk to those directories:
	// no absolute path, home directory or symbolic link leads out of them
	// (a run of a site playbook from a ConfigMap, which must not read the
	// pod's files).
	Roots []string
	// OnRead is told of every file read (nil: none).
	OnRead ReadHook
}

// ReadHook is told of every file a file function read, by resolved name,
// with its content: a saved plan fingerprints them like the playbook.
type ReadHook func(name string, data []byte)

// TableFor is Table for a playbook whose file functions read what f
// allows.
func TableFor(f FileAccess) map[string]function.Function {
	files := newFileSource(f)
	t := baseTable()

	t["file"] = makeFileFunc(files)
	t["filebase64"] = makeFileBase64Func(files)
	t["fileexists"] = makeFileExistsFunc(files)
	t["filesha256"] = makeFileSHA256Func(files)
	t = hidingSensitiveErrors(t)

	// templatefile evaluates templates with every other function, but not
	// itself, so a template cannot recurse into further templates.
	inner := make(map[string]function.Function, len(t))
	for name, fn := range t {
		inner[name] = fn
	}
	t["templatefile"] = hideSensitiveErrors(makeTemplateFileFunc(files, inner))
	return t
}

// Names returns the sorted function names (for docs).
func Names() []string {
	t := Table("", nil)
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// baseTable holds the functions that do not depend on the playbook location.
func baseTable() map[string]function.Function {
	return map[string]function.Function{
		// numeric
		"abs":      stdlib.AbsoluteFunc,
		"ceil":     stdlib.CeilFunc,
		"floor":    stdlib.FloorFunc,
		"log":      stdlib.LogFunc,
		"max":      stdlib.MaxFunc,
		"min":      stdlib.MinFunc,
		"pow":      stdlib.PowFunc,
		"signum":   stdlib.SignumFunc,
		"parseint": stdlib.ParseIntFunc,

		// strings
		"chomp":       stdlib.ChompFunc,
		"endswith":    endsWithFunc,
		"format":      stdlib.FormatFunc,
		"formatlist":  stdlib.FormatListFunc,
		"indent":      stdlib.IndentFunc,
		"join":        stdlib.JoinFunc,
		"lower":       stdlib.LowerFunc,
		"regex":       stdlib.RegexFunc,
		"regexall":    stdlib.RegexAllFunc,
		"replace":     replaceFunc,
		"split":       stdlib.SplitFunc,
		"startswith":  startsWithFunc,
		"strcontains": strContainsFunc,
		"strrev":      stdlib.ReverseFunc,
		"substr":      stdlib.SubstrFunc,
		"title":       stdlib.TitleFunc,
		"trim":        stdlib.TrimFunc,
		"trimprefix":  stdlib.TrimPrefixFunc,
		"trimspace":   stdlib.TrimSpaceFunc,
		"trimsuffix":  stdlib.TrimSuffixFunc,
		"upper":       stdlib.UpperFunc,

		// collections
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        coalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"index":           indexFunc,
		"keys":            stdlib.KeysFunc,
		"length":          lengthFunc,
		"lookup":          stdlib.LookupFunc,
		"merge":           stdlib.MergeFunc,
		"range":           stdlib.RangeFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,

		// encoding
		"base64decode": base64DecodeFunc,
		"base64encode": base64EncodeFunc,
		"base64gzip":   base64GzipFunc,
		"csvdecode":    stdlib.CSVDecodeFunc,
		"jsondecode":   stdlib.JSONDecodeFunc,
		"jsonencode":   stdlib.JSONEncodeFunc,
		"yamldecode":   ctyyaml.YAMLDecodeFunc,
		"yamlencode":   yamlEncodeFunc,

		// hashing
		"md5":    md5Func,
		"sha1":   sha1Func,
		"sha256": sha256Func,
		"sha512": sha512Func,

		// date and time
		"formatdate": stdlib.FormatDateFunc,
		"timeadd":    stdlib.TimeAddFunc,

		// type conversion
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring": stdlib.MakeToFunc(cty.String),

		// error handling
		"can": tryfunc.CanFunc,
		"try": tryfunc.TryFunc,

		// paths
		"basename": basenameFunc,
		"dirname":  dirnameFunc,

		// networking
		"cidrcontains": cidrContainsFunc,
		"cidrhost":     cidrHostFunc,
		"cidrnetmask":  cidrNetmaskFunc,
		"cidrsubnet":   cidrSubnetFunc,

		// windows helpers
		"quotearg":       quoteArgFunc,
		"ssh_public_key": sshPublicKeyFunc,
		"winpath":        winPathFunc,
	}
}
