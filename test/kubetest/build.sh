#!/bin/sh
# Build (once) and cache the etcd and kube-apiserver the Kubernetes tests run,
# so that the first `go test` does not spend minutes building them. Safe to
# run again: a cached build returns at once. Prints the binaries' directory;
# set WSU_KUBETEST_CACHE to cache somewhere else than ~/.cache/wsu/kube.
set -eu
cd "$(dirname "$0")/../.."
exec go run ./test/kubetest/prebuild
