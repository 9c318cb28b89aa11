package main

import (
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/transport/local"
)

// nativeHost is the machine the agent runs on: Win32 on Windows; POSIX
// elsewhere, where the Windows operations report that they are not supported.
func nativeHost() host.Host { return local.New() }
