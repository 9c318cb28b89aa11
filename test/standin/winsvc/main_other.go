//go:build !windows

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "winsvc is a Windows test stand-in: build it with GOOS=windows")
	os.Exit(2)
}
