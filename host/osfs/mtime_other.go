//go:build !linux

package osfs

import "time"

// ModTimeStep is not known off Linux here (the Windows platform asks its
// volume itself, agent/platform/windows): 0.
func ModTimeStep(string) time.Duration { return 0 }
