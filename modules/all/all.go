// Package all assembles the registry of every stock module, for the CLI, the
// controller and the docs generator.
package all

import (
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/modules/kube"
	"github.com/wsu-project/wsu/modules/windows"
)

// Registry returns a registry holding every stock module.
func Registry() *modules.Registry {
	var mods []modules.Module
	mods = append(mods, generic.Modules()...)
	mods = append(mods, windows.Modules()...)
	mods = append(mods, kube.Modules()...)
	return modules.NewRegistry(mods...)
}
