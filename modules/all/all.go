// Package all assembles the registry of every stock module, for the CLI, the
// controller and the docs generator.
package all

import (
	kubeclient "github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/modules/kube"
	"github.com/wsu-project/wsu/modules/preflight"
	"github.com/wsu-project/wsu/modules/windows"
)

// Options are what a run's modules hold of the run.
type Options struct {
	// Clusters are the run's client cache, which the cluster modules
	// share. nil: those modules fail if a task uses them.
	Clusters *kubeclient.Cache
	// Sources are the source hashes win_copy remembers (a run's own, or
	// its face's). nil: win_copy reads every source each time.
	Sources *windows.SourceHashes
}

// Registry returns a registry holding every stock module, built with o.
// Each run builds its own registry; one built with zero Options serves
// schemas and docs.
func Registry(o Options) *modules.Registry {
	var mods []modules.Module
	mods = append(mods, generic.Modules()...)
	mods = append(mods, windows.Modules(o.Sources)...)
	mods = append(mods, kube.Modules(o.Clusters)...)
	mods = append(mods, preflight.Modules(o.Clusters)...)
	return modules.NewRegistry(mods...)
}

// Schemas returns a registry for what needs only the modules' schemas: the
// loader's static checks, `wsu modules`, the docs generator.
func Schemas() *modules.Registry { return Registry(Options{}) }
