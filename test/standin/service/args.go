package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// flagValues returns the values of the flags named names in args, in the
// forms Go's flag package, pflag and urfave/cli accept: -name value,
// --name value, -name=value, --name=value. A name with no value after it
// is an error, as in the real parsers.
func flagValues(args []string, names ...string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break // the rest are positional
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		body := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, value, hasValue := strings.Cut(body, "=")
		for _, n := range names {
			if name != n {
				continue
			}
			if !hasValue {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("flag needs an argument: %s", a)
				}
				i++
				value = args[i]
			}
			out = append(out, value)
		}
	}
	return out, nil
}

// configFlags name the configuration files a service cannot start without.
var configFlags = []string{"config"}

// serviceName is what the stand-in calls itself: the simulated service's
// name when the simulation started it, else the executable's base name.
func serviceName() string {
	if s := os.Getenv("WSU_SIM_SERVICE"); s != "" {
		return s
	}
	exe := filepath.Base(os.Args[0])
	if i := strings.LastIndexAny(exe, `\/`); i >= 0 { // a Windows path seen on Linux
		exe = exe[i+1:]
	}
	return strings.TrimSuffix(strings.TrimSuffix(exe, ".exe"), ".EXE")
}
