package agent

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
)

// Every Host method but Close is an op, plus those of the optional
// host.NativePather and host.Firewall, and the agent has a handler for each.
func TestEveryMethodIsAnOp(t *testing.T) {
	assert.Len(t, proto.Ops, reflect.TypeFor[host.Host]().NumMethod()-1+
		reflect.TypeFor[host.NativePather]().NumMethod()+reflect.TypeFor[host.Firewall]().NumMethod())
	for _, op := range proto.Ops {
		assert.Contains(t, handlers, op)
	}
	assert.Len(t, handlers, len(proto.Ops))
}
