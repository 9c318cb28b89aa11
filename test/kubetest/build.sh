#!/bin/sh
# Build (once) and cache the etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl the Kubernetes tests run, so that the first `go test`
# does not spend minutes building them. Each binary is cached on its own (its
# wrapper module and the Go version are its key). Safe to run again: a cached build returns at once. Prints the binaries' paths;
# set WSU_KUBETEST_CACHE to cache somewhere else than ~/.cache/wsu/kube.
set -eu
cd "$(dirname "$0")/../.."
exec go run ./test/kubetest/prebuild
