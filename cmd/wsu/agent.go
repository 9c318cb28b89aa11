package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/hashcache"
	"github.com/wsu-project/wsu/version"
)

func (a *app) agentCommand() *cobra.Command {
	var platform, simRoot, simHostname, simIPv4, cacheFile string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve the Host API on stdin/stdout (started on a node by the transports)",
		Long: `Agent is the node side of wsu: the transports (ssh, winrm, local) start it on the
managed host and drive it over its stdin/stdout with a framed RPC (docs/agent-protocol.md).
It exits when its input closes. You do not run it by hand.

--platform native serves the machine it runs on (Windows: Win32 APIs). --platform sim
serves a Windows host SIMULATED under --sim-root, for tests and the demo only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var backend host.Host
			switch platform {
			case "native":
				backend = nativeHost()
				if cacheFile == "" {
					cacheFile = nativeCacheFile()
				}
			case "sim":
				if simRoot == "" {
					return fmt.Errorf("--platform sim needs --sim-root DIR")
				}
				h, err := sim.New(simRoot, sim.Options{Hostname: simHostname, FQDN: simHostname + ".local", IPv4: simIPv4})
				if err != nil {
					return err
				}
				backend = h
				if cacheFile == "" {
					cacheFile = filepath.Join(simRoot, "state", "hash-cache.json")
				}
			default:
				return fmt.Errorf("--platform must be native or sim, not %q", platform)
			}
			if cacheFile != "" {
				// Warm: a re-run right after a copy finds the sum ready.
				backend = hashcache.Wrap(backend, cacheFile, hashcache.Warm())
			}
			sum, _ := selfSHA256(cacheFile)
			err := agent.Serve(cmd.Context(), a.stdin, a.stdout, backend, agent.ServerInfo{
				Version:  version.Version,
				SHA256:   sum,
				Platform: helloPlatform(platform),
			})
			// Stops the cache's background hashing before the process ends.
			return errors.Join(err, backend.Close())
		},
	}
	f := cmd.Flags()
	f.StringVar(&platform, "platform", "native", "native, or sim (a simulated Windows host, for tests and the demo)")
	f.StringVar(&simRoot, "sim-root", "", "directory holding the simulated host's state (--platform sim)")
	f.StringVar(&simHostname, "sim-hostname", "sim-host", "hostname the simulated host reports")
	f.StringVar(&simIPv4, "sim-ipv4", "127.0.0.1", "IPv4 address the simulated host reports")
	f.StringVar(&cacheFile, "hash-cache", "", "file keeping sha256 results between runs (default: beside the agent binary on Windows, the user cache directory elsewhere, or the sim state)")
	return cmd
}

// selfSHA256 is the agent binary's sum, kept in the hash cache file when
// there is one.
func selfSHA256(cacheFile string) (string, error) {
	exe, err := os.Executable()
	if cacheFile == "" || err != nil {
		return agent.SelfSHA256()
	}
	return hashcache.LocalSHA256(cacheFile, exe)
}

// helloPlatform names the backend in the hello: the OS for the native one
// ("windows" on a node), "sim" for the simulation.
func helloPlatform(flag string) string {
	if flag == "native" {
		return runtime.GOOS
	}
	return flag
}

// nativeCacheFile is where the native agent keeps its hash cache: beside
// the agent on a Windows node (C:\k\wsu), in the user's cache directory
// elsewhere (a --local run on Linux must not write beside /usr/local/bin/wsu).
// "" (no cache) when neither can be found.
func nativeCacheFile() string {
	if runtime.GOOS == "windows" {
		exe, err := os.Executable()
		if err != nil {
			return ""
		}
		return filepath.Join(filepath.Dir(exe), "wsu-hash-cache.json")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "wsu")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return filepath.Join(dir, "hash-cache.json")
}
