// Package all assembles the registry of every stock module, for the CLI, the
// controller and the docs generator.
package all

import (
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// Registry returns a registry holding every stock module.
func Registry() *modules.Registry {
	return modules.NewRegistry(generic.Modules()...)
}
