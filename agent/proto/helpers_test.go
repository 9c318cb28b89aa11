package proto

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/wsu-project/wsu/host"
)

func errWrap(op string, err error) error { return fmt.Errorf("%s: %w", op, err) }
func notSupported() error                { return host.NotSupported("svc", "test") }
func notExist() error                    { return &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist} }
func contextCanceled() error             { return context.Canceled }
