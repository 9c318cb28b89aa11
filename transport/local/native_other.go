//go:build !windows

package local

import "github.com/wsu-project/wsu/host"

func newNative() host.Host { return NewPOSIX() }
