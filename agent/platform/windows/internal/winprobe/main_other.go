//go:build !windows

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "winprobe drives the Windows platform: build it with GOOS=windows")
	os.Exit(2)
}
