package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// dismInfo is a transcript of `dism /Online /English /Get-FeatureInfo`, in
// the layout DISM documents and prints (a stand-in written from that
// layout, not captured from a particular build).
func dismInfo(name, state, restart string) string {
	return "\r\nDeployment Image Servicing and Management tool\r\nVersion: 10.0.20348.681\r\n\r\n" +
		"Image Version: 10.0.20348.2113\r\n\r\nFeature Information:\r\n\r\n" +
		"Feature Name : " + name + "\r\nDisplay Name : " + name + "\r\n" +
		"Description : Provides services and tools to create and manage Windows Server Containers and their resources.\r\n" +
		"Restart Required : " + restart + "\r\nState : " + state + "\r\n\r\nCustom Properties:\r\n\r\n" +
		"(No custom properties found)\r\n\r\nThe operation completed successfully.\r\n"
}

const dismUnknownOut = "\r\nDeployment Image Servicing and Management tool\r\nVersion: 10.0.20348.681\r\n\r\n" +
	"Image Version: 10.0.20348.2113\r\n\r\n\r\nError: 0x800f080c\r\n\r\nFeature name Nope is unknown.\r\n\r\n" +
	"The DISM log file can be found at C:\\Windows\\Logs\\DISM\\dism.log\r\n"

func TestParseFeatureInfo(t *testing.T) {
	tests := []struct {
		name, out string
		want      host.FeatureInfo
		wantErr   string
	}{
		{"enabled", dismInfo("Containers", "Enabled", "Possible"), host.FeatureInfo{Name: "Containers", State: host.FeatureEnabled, RestartPossible: true}, ""},
		{"disabled", dismInfo("Containers", "Disabled", "Possible"), host.FeatureInfo{Name: "Containers", State: host.FeatureDisabled, RestartPossible: true}, ""},
		{"enable pending", dismInfo("Containers", "Enable Pending", "Possible"), host.FeatureInfo{Name: "Containers", State: host.FeatureEnablePending, RestartRequired: true, RestartPossible: true}, ""},
		{"disable pending", dismInfo("Containers", "Disable Pending", "Required"), host.FeatureInfo{Name: "Containers", State: host.FeatureDisablePending, RestartRequired: true, RestartPossible: true}, ""},
		{"payload removed", dismInfo("Containers", "Disabled with Payload Removed", "No"), host.FeatureInfo{Name: "Containers", State: host.FeatureRemoved}, ""},
		{"no restart", dismInfo("TelnetClient", "Disabled", "No"), host.FeatureInfo{Name: "TelnetClient", State: host.FeatureDisabled}, ""},
		{"stub prints nothing", "", host.FeatureInfo{}, "printed no feature state"},
		{"unknown state", dismInfo("Containers", "Half On", "No"), host.FeatureInfo{}, `state "Half On"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFeatureInfo("containers", tt.out)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// fakeDism is a STAND-IN for dism.exe that keeps one feature's state and
// answers as DISM does: exit 3010 after an enable that needs a restart,
// 0x800f080c for a name it does not know. It checks every command line.
type fakeDism struct {
	state   string // DISM's words
	calls   []string
	failRun error
}

func (f *fakeDism) run(_ context.Context, req host.RunRequest) (host.RunResult, error) {
	f.calls = append(f.calls, strings.Join(req.Argv, " "))
	if f.failRun != nil {
		return host.RunResult{}, f.failRun
	}
	if req.Argv[0] != `C:\Windows\System32\dism.exe` || req.Argv[1] != "/Online" || req.Argv[2] != "/English" || req.Timeout <= 0 {
		return host.RunResult{ExitCode: 87, Stdout: []byte("Error: 87\r\n\r\nThe option is unknown.\r\n")}, nil
	}
	name := strings.TrimPrefix(req.Argv[4], "/FeatureName:")
	if !strings.EqualFold(name, "Containers") {
		return host.RunResult{ExitCode: int(int32(-2146498548)), Stdout: []byte(dismUnknownOut)}, nil // 0x800f080c as Windows hands it over
	}
	switch req.Argv[3] {
	case "/Get-FeatureInfo":
		return host.RunResult{Stdout: []byte(dismInfo("Containers", f.state, "Possible"))}, nil
	case "/Enable-Feature":
		if strings.Join(req.Argv[5:], " ") != "/All /NoRestart" {
			return host.RunResult{ExitCode: 87}, nil
		}
		if f.state == "Enabled" {
			return host.RunResult{Stdout: []byte("The operation completed successfully.\r\n")}, nil
		}
		f.state = "Enable Pending"
		return host.RunResult{ExitCode: 3010, Stdout: []byte("The operation completed successfully.\r\nRestart Windows to complete this operation.\r\n")}, nil
	}
	return host.RunResult{ExitCode: 87}, nil
}

func TestDismContract(t *testing.T) {
	ctx := context.Background()
	f := &fakeDism{state: "Disabled"}
	d := dism{exe: `C:\Windows\System32\dism.exe`, run: f.run}

	fi, err := d.info(ctx, "Containers")
	require.NoError(t, err)
	assert.Equal(t, host.FeatureDisabled, fi.State)

	fi, err = d.enable(ctx, "Containers")
	require.NoError(t, err)
	assert.Equal(t, host.FeatureInfo{Name: "Containers", State: host.FeatureEnablePending, RestartRequired: true, RestartPossible: true}, fi)
	assert.Equal(t, []string{
		`C:\Windows\System32\dism.exe /Online /English /Enable-Feature /FeatureName:Containers /All /NoRestart`,
		`C:\Windows\System32\dism.exe /Online /English /Get-FeatureInfo /FeatureName:Containers`,
	}, f.calls[1:], "enable, then read what DISM now says")

	_, err = d.info(ctx, "Nope")
	assert.ErrorIs(t, err, host.ErrFeatureUnknown)
	_, err = d.enable(ctx, "Nope")
	assert.ErrorIs(t, err, host.ErrFeatureUnknown)
	_, err = d.info(ctx, "Containers /Quiet")
	assert.ErrorContains(t, err, "only letters", "a name never becomes another option")

	f.failRun = errors.New("access denied")
	_, err = d.info(ctx, "Containers")
	assert.ErrorContains(t, err, "access denied")
}

func TestDismFailures(t *testing.T) {
	assert.ErrorContains(t, dismFailed("C", host.RunResult{ExitCode: 740}), "elevated")
	assert.ErrorContains(t, dismFailed("C", host.RunResult{TimedOut: true, ExitCode: 1}), "did not finish")
	err := dismFailed("C", host.RunResult{ExitCode: 0x800f081f & 0x7fffffff, Stdout: []byte("Error: 0x800f081f\r\n\r\nThe source files could not be found.\r\n\r\nThe DISM log file can be found at C:\\x.log\r\n")})
	assert.ErrorContains(t, err, "Error: 0x800f081f The source files could not be found.")
	assert.NotContains(t, err.Error(), "log file")
	assert.NoError(t, dismFailed("C", host.RunResult{ExitCode: 3010}))
	assert.Equal(t, fmt.Sprint(uint32(0x800f080c)), fmt.Sprint(code(int(int32(-2146498548)))))
}

func TestShutdownCall(t *testing.T) {
	c, err := shutdownCallFor(host.RebootRequest{Delay: 1500 * 1e6, Message: "wsu"})
	require.NoError(t, err)
	assert.Equal(t, ShutdownCall{Message: "wsu", Timeout: 2, ForceAppsClosed: true, RebootAfterShutdown: true, Reason: 0x80040002}, c)
	_, err = shutdownCallFor(host.RebootRequest{Message: strings.Repeat("x", 513)})
	assert.ErrorContains(t, err, "longer than the 512")
	_, err = shutdownCallFor(host.RebootRequest{Delay: -1})
	assert.Error(t, err)
}
