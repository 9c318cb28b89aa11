package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
)

// dism reads and enables optional features by running dism.exe, the one
// way that needs neither cgo nor COM: the DISM API (dismapi.dll) could be
// called through x/sys/windows, but its structures are packed and nothing
// here could exercise it (Wine ships no dismapi.dll, and its dism.exe is
// a stub that prints nothing and exits 0); WMI's Win32_OptionalFeature is
// read-only and needs COM. /English makes DISM print the same words on
// every display language, so the output can be parsed.
//
// The seam is run: the Windows platform passes its own Run; the contract
// tests (dism_test.go) pass a stand-in that answers as dism.exe does, from
// transcripts of its output. A stand-in it is: the transcripts are written
// from DISM's documented output format, not captured from every Windows
// build, and what a new build prints differently fails loudly (an
// unparsed State is an error, never a guess).
type dism struct {
	exe string // C:\Windows\System32\dism.exe
	run func(ctx context.Context, req host.RunRequest) (host.RunResult, error)
}

// DISM's exit codes that mean something here.
const (
	dismRestartRequired = 3010       // ERROR_SUCCESS_REBOOT_REQUIRED
	dismUnknownFeature  = 0x800f080c // CBS_E_UNKNOWN_UPDATE: "Feature name X is unknown."
	dismElevation       = 740        // ERROR_ELEVATION_REQUIRED
)

// How long one dism.exe may take: enabling Containers takes a minute or
// two on a real machine; reading a feature, seconds.
const (
	dismReadTimeout   = 5 * time.Minute
	dismEnableTimeout = host.FeatureOpTimeout - time.Minute
)

// info describes a feature (/Get-FeatureInfo).
func (d dism) info(ctx context.Context, name string) (host.FeatureInfo, error) {
	if err := host.ValidFeatureName(name); err != nil {
		return host.FeatureInfo{}, err
	}
	res, err := d.run(ctx, host.RunRequest{
		Argv:    []string{d.exe, "/Online", "/English", "/Get-FeatureInfo", "/FeatureName:" + name},
		Timeout: dismReadTimeout,
	})
	if err != nil {
		return host.FeatureInfo{}, fmt.Errorf("feature %s: %w", name, err)
	}
	if err := dismFailed(name, res); err != nil {
		return host.FeatureInfo{}, err
	}
	return parseFeatureInfo(name, string(res.Stdout))
}

// enable enables a feature and the features it needs (/All), never
// restarting (/NoRestart): the playbook decides when (win_reboot). It
// reads the feature again afterwards, so the answer is DISM's own.
func (d dism) enable(ctx context.Context, name string) (host.FeatureInfo, error) {
	if err := host.ValidFeatureName(name); err != nil {
		return host.FeatureInfo{}, err
	}
	res, err := d.run(ctx, host.RunRequest{
		Argv:    []string{d.exe, "/Online", "/English", "/Enable-Feature", "/FeatureName:" + name, "/All", "/NoRestart"},
		Timeout: dismEnableTimeout,
	})
	if err != nil {
		return host.FeatureInfo{}, fmt.Errorf("enable feature %s: %w", name, err)
	}
	if err := dismFailed(name, res); err != nil {
		return host.FeatureInfo{}, fmt.Errorf("enable %w", err)
	}
	fi, err := d.info(ctx, name)
	if err != nil {
		return host.FeatureInfo{}, err
	}
	if code(res.ExitCode) == dismRestartRequired {
		fi.RestartRequired = true
	}
	return fi, nil
}

// code reads an exit code as the unsigned number Windows documents
// (DISM's HRESULTs arrive negative when read as int32).
func code(c int) uint32 { return uint32(int64(c)) }

// dismFailed turns a failed dism.exe into an error quoting its own
// explanation.
func dismFailed(name string, res host.RunResult) error {
	if res.TimedOut {
		return fmt.Errorf("feature %s: dism.exe did not finish in time", name)
	}
	switch code(res.ExitCode) {
	case 0, dismRestartRequired:
		return nil
	case dismUnknownFeature:
		return fmt.Errorf("feature %s: %w (DISM error 0x800f080c: the feature name is unknown to this Windows)", name, host.ErrFeatureUnknown)
	case dismElevation:
		return fmt.Errorf("feature %s: dism.exe needs an elevated (administrator) session (error 740)", name)
	}
	return fmt.Errorf("feature %s: dism.exe failed with exit code %#x: %s", name, code(res.ExitCode), dismError(string(res.Stdout)+"\n"+string(res.Stderr)))
}

// dismError picks DISM's error text: the lines from "Error:" on, before
// the log file's name.
func dismError(out string) string {
	var keep []string
	in := false
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Error:") {
			in = true
		}
		if !in || l == "" {
			continue
		}
		if strings.HasPrefix(l, "The DISM log file can be found at") {
			break
		}
		keep = append(keep, l)
	}
	if len(keep) == 0 {
		return "(no error text)"
	}
	return strings.Join(keep, " ")
}

// featureStates maps the State line DISM prints (with /English).
var featureStates = map[string]host.FeatureState{
	"enabled":                       host.FeatureEnabled,
	"enable pending":                host.FeatureEnablePending,
	"disabled":                      host.FeatureDisabled,
	"disable pending":               host.FeatureDisablePending,
	"disabled with payload removed": host.FeatureRemoved,
}

// parseFeatureInfo reads /Get-FeatureInfo's "Key : Value" lines. An
// output without a State line (Wine's stub prints nothing) or with a
// state it does not know is an error, never a guess.
func parseFeatureInfo(name, out string) (host.FeatureInfo, error) {
	fields := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		k, v, ok := strings.Cut(l, " : ")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if _, seen := fields[k]; !seen {
			fields[k] = strings.TrimSpace(v)
		}
	}
	st, ok := fields["state"]
	if !ok {
		return host.FeatureInfo{}, fmt.Errorf("feature %s: %w", name, errNoState)
	}
	state, ok := featureStates[strings.ToLower(st)]
	if !ok {
		return host.FeatureInfo{}, fmt.Errorf("feature %s: dism.exe reported the state %q, which wsu does not know", name, st)
	}
	fi := host.FeatureInfo{Name: name, State: state}
	if n := fields["feature name"]; n != "" {
		fi.Name = n
	}
	fi.RestartRequired = state == host.FeatureEnablePending || state == host.FeatureDisablePending
	switch strings.ToLower(fields["restart required"]) {
	case "possible", "required":
		fi.RestartPossible = true
	}
	return fi, nil
}

// errNoState: dism.exe succeeded but printed no State line.
var errNoState = errors.New("dism.exe printed no feature state (a stub dism.exe, such as Wine's, prints nothing)")
