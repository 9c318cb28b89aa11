package funcs

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"unicode/utf8"

	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

var base64EncodeFunc = function.New(&function.Spec{
	Description: "Encodes the UTF-8 bytes of str as standard Base64.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var base64DecodeFunc = function.New(&function.Spec{
	Description: "Decodes a standard Base64 string whose content is UTF-8 text.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		raw, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to decode base64 data: %w", err)
		}
		if !utf8.Valid(raw) {
			return cty.UnknownVal(cty.String), fmt.Errorf("the result of decoding the provided string is not valid UTF-8")
		}
		return cty.StringVal(string(raw)), nil
	},
})

var base64GzipFunc = function.New(&function.Spec{
	Description: "Compresses str with gzip and encodes the result as standard Base64.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write([]byte(args[0].AsString())); err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to compress: %w", err)
		}
		if err := zw.Close(); err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to compress: %w", err)
		}
		return cty.StringVal(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
	},
})

var yamlEncodeFunc = function.New(&function.Spec{
	Description: "Encodes any value as YAML.",
	Params: []function.Parameter{
		{
			Name:             "value",
			Type:             cty.DynamicPseudoType,
			AllowNull:        true,
			AllowDynamicType: true,
		},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if !args[0].IsWhollyKnown() {
			return cty.UnknownVal(cty.String), nil
		}
		out, err := ctyyaml.Standard.Marshal(args[0])
		if err != nil {
			return cty.UnknownVal(cty.String), err
		}
		return cty.StringVal(string(out)), nil
	},
})

// hexDigest returns the lowercase hex digest of data using a new h.
func hexDigest(h func() hash.Hash, data []byte) string {
	d := h()
	d.Write(data)
	return hex.EncodeToString(d.Sum(nil))
}

func makeHashFunc(name string, h func() hash.Hash) function.Function {
	return function.New(&function.Spec{
		Description: fmt.Sprintf("Returns the hexadecimal %s digest of the UTF-8 bytes of str.", name),
		Params:      []function.Parameter{{Name: "str", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.StringVal(hexDigest(h, []byte(args[0].AsString()))), nil
		},
	})
}

var (
	md5Func    = makeHashFunc("MD5", md5.New)
	sha1Func   = makeHashFunc("SHA-1", sha1.New)
	sha256Func = makeHashFunc("SHA-256", sha256.New)
	sha512Func = makeHashFunc("SHA-512", sha512.New)
)
