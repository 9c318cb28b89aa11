//go:build unix

// Command winesetup prepares the Wine test tier ahead of `go test` (setup.sh
// runs it): packages, the stand-in DLL and the template prefix. Idempotent.
package main

import (
	"fmt"
	"os"

	winetest "github.com/wsu-project/wsu/test/wine"
)

func main() {
	env, err := winetest.Setup(func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "wine setup: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s\ntemplate %s\ndll %s\n", env.WineVersion, env.Template, env.DLL)
}
