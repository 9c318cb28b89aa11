// Command prebuild builds and caches the kubetest control plane (etcd and
// kube-apiserver) ahead of the tests, which would otherwise build it on
// first use. It prints the directory holding the binaries.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/wsu-project/wsu/test/kubetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	dir, err := kubetest.Assets(ctx, logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
