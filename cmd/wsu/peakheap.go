package main

import (
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// The hidden --memprofile, for the benchmarks (docs/performance.md): a heap
// profile taken when the run's heap was largest, since a fleet's peak RSS
// is reached mid-run (copies in flight) and a profile at exit would show a
// heap already emptied. peakHeap samples the live heap every interval and,
// whenever it has grown by a tenth over the largest seen, writes the heap
// profile again (a temporary file renamed over path, so path is always a
// whole profile). The profile's in-use figures are as of the last garbage
// collection, as pprof's heap profiles always are.
type peakHeap struct {
	path     string
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}
	err      error // of the last write
}

// liveHeapMetric is the bytes of live and not yet collected heap objects.
const liveHeapMetric = "/memory/classes/heap/objects:bytes"

func startPeakHeap(path string, interval time.Duration) *peakHeap {
	p := &peakHeap{path: path, interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	go p.watch()
	return p
}

func (p *peakHeap) watch() {
	defer close(p.done)
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	var largest uint64
	t := time.NewTicker(p.interval)
	defer t.Stop()
	check := func() {
		metrics.Read(sample)
		if now := sample[0].Value.Uint64(); now > largest+largest/10 {
			largest = now
			p.err = p.write()
		}
	}
	for {
		check()
		select {
		case <-p.stop:
			check() // a peak since the last tick: a short run's only one
			return
		case <-t.C:
		}
	}
}

func (p *peakHeap) write() error {
	f, err := os.CreateTemp(filepath.Dir(p.path), ".memprofile-*")
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), p.path)
}

// Stop ends the sampling and reports the last write's error.
func (p *peakHeap) Stop() error {
	close(p.stop)
	<-p.done
	return p.err
}
