//go:build !unix

package kubetest

import (
	"context"
	"errors"
)

func lockFile(context.Context, string, func()) (func(), error) {
	return nil, errors.New("kubetest: the control plane test bed runs on Unix only")
}
