// Command kubectl is upstream's kubectl (k8s.io/kubectl's command, as
// k8s.io/kubernetes/cmd/kubectl builds it), built through this wrapper
// module for the same reason as kube-apiserver's: the tests and the
// controller demo run the real client a cluster admin runs, at the test
// bed's version, built and cached by kubetest rather than taken from
// whatever PATH holds.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
