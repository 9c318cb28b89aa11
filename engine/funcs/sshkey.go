package funcs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	gossh "golang.org/x/crypto/ssh"
)

// sshPublicKeyFunc returns the public half of an SSH private key (or a
// public key's canonical form) as an authorized_keys line without comment.
// The result is not sensitive even when the key is: a public key is meant
// to be shown, and rotate-key's plan must be able to name it.
var sshPublicKeyFunc = function.New(&function.Spec{
	Description: "Returns the public key of an SSH private key, as an authorized_keys line without comment.",
	Params: []function.Parameter{{
		Name: "key", Type: cty.String, AllowMarked: true,
	}},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		text, _ := args[0].Unmark()
		k, err := sshPublicKey(text.AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), function.NewArgError(0, err)
		}
		return cty.StringVal(strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))), nil
	},
})

// sshPublicKey reads a private key, or a public key line; errors never
// quote the key.
func sshPublicKey(text string) (gossh.PublicKey, error) {
	if k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(text)); err == nil {
		return k, nil
	}
	s, err := gossh.ParsePrivateKey([]byte(text))
	var missing *gossh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		if missing.PublicKey != nil {
			return missing.PublicKey, nil
		}
		return nil, errors.New("the private key is encrypted and carries no public key")
	case err != nil:
		return nil, fmt.Errorf("not an SSH private or public key: %v", err)
	}
	return s.PublicKey(), nil
}
