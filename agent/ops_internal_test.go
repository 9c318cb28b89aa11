package agent

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
)

// Every Host method but Close is an op, plus one per method of the
// optional interfaces (host.NativePather, host.CertStore, host.Rebooter,
// host.OptionalFeatures, host.Firewall), and the agent has a handler for each.
func TestEveryMethodIsAnOp(t *testing.T) {
	optional := reflect.TypeFor[host.NativePather]().NumMethod() + reflect.TypeFor[host.CertStore]().NumMethod() +
		reflect.TypeFor[host.Rebooter]().NumMethod() + reflect.TypeFor[host.OptionalFeatures]().NumMethod() +
		reflect.TypeFor[host.Firewall]().NumMethod()
	assert.Len(t, proto.Ops, reflect.TypeFor[host.Host]().NumMethod()-1+optional)
	for _, op := range proto.Ops {
		assert.Contains(t, handlers, op)
	}
	assert.Len(t, handlers, len(proto.Ops))
}
