//go:build linux

package podrunner

// ResolveIn is resolveIn, for the external tests.
var ResolveIn = resolveIn
