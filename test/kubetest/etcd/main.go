// Command etcd is etcd built from the Go module proxy for the kubetest test
// bed: Debian's etcd 3.4 breaks client-go watches, and no etcd binary can be
// downloaded where the tests run.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
