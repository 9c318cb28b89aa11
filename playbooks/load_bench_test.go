package playbooks_test

import (
	"testing"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/playbooks"
)

// BenchmarkLoadJoin is the playbook load of every join (the CLI's and the
// controller's): the stock join and its includes, parsed and checked.
func BenchmarkLoadJoin(b *testing.B) {
	reg := all.Schemas()
	for b.Loop() {
		if _, diags := playbook.NewLoader(reg, playbooks.FS).Load("wsu:join.hcl"); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}
