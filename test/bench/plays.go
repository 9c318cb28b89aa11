//go:build linux

package main

import (
	"fmt"
	"strings"
	"time"
)

// playTime is how long any task of one play was running (the union of its
// task instances' intervals over all hosts).
type playTime struct {
	play string
	wall time.Duration
}

// playSplit is a run's time per play, in the order the plays first
// reported: where a cold join's time went, so the next wait to go is
// visible.
func playSplit(tasks []event) []playTime {
	var order []string
	spans := map[string][]span{}
	for _, e := range tasks {
		if _, seen := spans[e.Play]; !seen {
			order = append(order, e.Play)
		}
		spans[e.Play] = append(spans[e.Play], span{e.Time.Add(-time.Duration(e.DurationMS) * time.Millisecond), e.Time})
	}
	out := make([]playTime, len(order))
	for i, p := range order {
		out[i] = playTime{play: p, wall: union(spans[p])}
	}
	return out
}

// playNote is a cold join's split by play, for the notes under the table:
// the first run's (a split is one run's shape, not a median).
func playNote(name string, js []*joinResult) string {
	if len(js) == 0 || len(js[0].tasks) == 0 {
		return ""
	}
	var parts []string
	for _, p := range playSplit(js[0].tasks) {
		parts = append(parts, fmt.Sprintf("%s %s", p.play, secs(p.wall)))
	}
	return fmt.Sprintf("%s: time per play (tasks running, all hosts):\n    %s", name, strings.Join(parts, " · "))
}
