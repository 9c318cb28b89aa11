package modutil

import (
	"sync"

	"github.com/hashicorp/hcl/v2"
)

// Together runs a module's independent reads at once (the cluster's
// objects, the node's files: a round trip each, which one after another
// add up in every plan of every run) and answers as if they had run one
// after another up to the first that failed: that read's diagnostics, or
// nil. Each read fills its own part of the caller's state; none may read
// another's.
func Together(reads ...func() hcl.Diagnostics) hcl.Diagnostics {
	diags := make([]hcl.Diagnostics, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Go(func() { diags[i] = read() })
	}
	wg.Wait()
	for _, d := range diags {
		if d.HasErrors() {
			return d
		}
	}
	return nil
}
