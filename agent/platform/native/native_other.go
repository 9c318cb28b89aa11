//go:build !windows

package native

import "github.com/wsu-project/wsu/host"

func newNative() host.Host { return NewPOSIX() }
