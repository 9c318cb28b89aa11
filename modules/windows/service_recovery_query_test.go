package windows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
)

// reportingHost answers service queries with the given failure actions,
// as the Windows platform does from the SCM.
type reportingHost struct {
	host.Host
	rec *host.ObservedRecovery
}

func (r *reportingHost) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	info, err := r.Host.QueryService(ctx, name)
	info.Recovery = r.rec
	return info, err
}

// Failure actions the query reports are compared as the registry's would
// be: other actions than restarts are a difference.
func TestServiceRecoveryFromQuery(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kubelet", kubeletExe)
	cfg := cfgFor(t, Service{}, map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe),
		"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(60, 60), "reset_period": cty.NumberIntVal(86400)}),
	})
	rec := host.ServiceRecovery{RestartDelays: []time.Duration{time.Minute, time.Minute}, ResetPeriod: 24 * time.Hour}
	same := &reportingHost{Host: h, rec: &host.ObservedRecovery{ServiceRecovery: rec}}
	assert.Nil(t, plan(t, Service{}, same, cfg).Change)

	other := &reportingHost{Host: h, rec: &host.ObservedRecovery{ServiceRecovery: rec, Other: true}}
	pr := plan(t, Service{}, other, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, []string{"recovery"}, fieldNames(pr.Change))
	assert.Equal(t, recoveryObj(86400, 60, 60), field(t, pr.Change, "recovery").Old)
}
