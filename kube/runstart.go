package kube

import (
	"context"
	"time"
)

// processStart is when this process began: the start of a CLI run, and the
// default start of the CSR time window. Set once, never changed.
var processStart = time.Now()

type runStartCtxKey struct{}

// WithRunStart records when the run under ctx started, for RunStart.
func WithRunStart(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, runStartCtxKey{}, t)
}

// RunStart is when the run under ctx started: WithRunStart's time, else
// when the process started (a CLI run is one process). k8s_csr_approve
// ignores CSRs created before it, less CSRClockSkew.
func RunStart(ctx context.Context) time.Time {
	if t, ok := ctx.Value(runStartCtxKey{}).(time.Time); ok {
		return t
	}
	return processStart
}
