package native

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/wsu-project/wsu/host"
)

func TestParseDefaultRoute(t *testing.T) {
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name, table, want string
	}{
		{name: "empty", table: "", want: ""},
		{name: "header only", table: header, want: ""},
		{
			name: "default route",
			table: header +
				"eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
				"eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n",
			want: "eth0",
		},
		{
			name: "lowest metric wins",
			table: header +
				"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n" +
				"eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n",
			want: "eth0",
		},
		{
			name:  "down route ignored",
			table: header + "eth0\t00000000\t0100A8C0\t0002\t0\t0\t100\t00000000\t0\t0\t0\n",
			want:  "",
		},
		{
			name:  "no default route",
			table: header + "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
			want:  "",
		},
		{name: "garbage", table: header + "eth0 zz\nnot a route line at all\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseDefaultRoute(strings.NewReader(tt.table)))
		})
	}
}

func TestParseOSRelease(t *testing.T) {
	tests := []struct {
		name, in, id, version string
	}{
		{name: "quoted", in: "NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"24.04\"\n", id: "ubuntu", version: "24.04"},
		{name: "single quoted", in: "ID='debian'\nVERSION_ID='12'\n", id: "debian", version: "12"},
		{name: "rolling", in: "ID=arch\n# comment\n", id: "arch"},
		{name: "empty", in: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, version := parseOSRelease(strings.NewReader(tt.in))
			assert.Equal(t, tt.id, id)
			assert.Equal(t, tt.version, version)
		})
	}
}

func TestFacts(t *testing.T) {
	h := New()
	f, err := h.Facts(context.Background())
	require.NoError(t, err)
	assert.Equal(t, runtime.GOOS, f.OS)
	assert.Equal(t, runtime.GOARCH, f.Architecture)
	assert.NotEmpty(t, f.Hostname)
	assert.NotEmpty(t, f.FQDN)
	if f.IPv4 != "" {
		assert.Len(t, strings.Split(f.IPv4, "."), 4)
	}
	again, err := h.Facts(context.Background())
	require.NoError(t, err)
	assert.Equal(t, f, again, "facts are cached")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = h.Facts(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestClose(t *testing.T) {
	assert.NoError(t, New().Close())
}

func TestWindowsOperationsUnsupported(t *testing.T) {
	h := New()
	svc, ok := h.(host.Services)
	require.True(t, ok, "local host offers the Services interface")
	_, err := svc.QueryService(context.Background(), "kubelet")
	require.ErrorIs(t, err, host.ErrNotSupported)
	_, err = h.(host.Registry).RegistryGet(context.Background(), `HKLM\SOFTWARE`, "x")
	require.ErrorIs(t, err, host.ErrNotSupported)
}
