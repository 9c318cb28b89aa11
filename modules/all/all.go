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

// Registry returns a registry holding every stock module, whose cluster
// modules share clusters: the run's client cache. Each run builds its own
// registry; one built with a nil cache serves schemas and docs, and its
// cluster modules fail if a task uses them.
func Registry(clusters *kubeclient.Cache) *modules.Registry {
	var mods []modules.Module
	mods = append(mods, generic.Modules()...)
	mods = append(mods, windows.Modules()...)
	mods = append(mods, kube.Modules(clusters)...)
	mods = append(mods, preflight.Modules(clusters)...)
	return modules.NewRegistry(mods...)
}

// Schemas returns a registry for what needs only the modules' schemas: the
// loader's static checks, `wsu modules`, the docs generator.
func Schemas() *modules.Registry { return Registry(nil) }
