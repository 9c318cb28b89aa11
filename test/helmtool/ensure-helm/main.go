// Command ensure-helm builds the helm the tests run into the tools cache
// (package helmtool) if it is not there, and prints its path: make helm.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/wsu-project/wsu/test/helmtool"
)

func main() {
	bin, err := helmtool.Ensure(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
