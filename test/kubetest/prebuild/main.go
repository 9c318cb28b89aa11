// Command prebuild builds and caches the kubetest control plane (etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler) and kubectl
// ahead of the tests, which would otherwise build each binary on first use. It prints
// the path of each binary.
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
	names := kubetest.AllBinaries()
	paths, err := kubetest.Binaries(ctx, logf, names...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range names {
		fmt.Println(paths[name])
	}
}
