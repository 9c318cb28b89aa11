// Package agentcmd is the node agent's command line, shared by the slim
// agent binary (cmd/wsu-agent, what the transports deploy and what
// connection=local and the sim run) and the CLI's `wsu agent` subcommand,
// so both parse the same flags and serve the same way. It uses the
// standard flag package, not cobra: whatever it imports ends up in every
// node's agent (docs/architecture.md, make lint checks the list).
package agentcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/platform/native"
	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/hashcache"
	"github.com/wsu-project/wsu/version"
)

// Usage is the help text's head; the flags follow it.
const Usage = `Usage: wsu-agent [agent] [flags]

The node side of wsu: the transports (ssh, winrm, local) start it on the
managed host and drive it over its stdin/stdout with a framed RPC
(docs/agent-protocol.md). It exits when its input closes. You do not run
it by hand. The transports start it as "PATH agent FLAGS"; the leading
word "agent" is optional, so a full wsu binary (whose "wsu agent" is the
same command) can stand in for it.

--platform native serves the machine it runs on (Windows: Win32 APIs).
--platform sim serves a Windows host SIMULATED under --sim-root, for tests
and the demo only.

Flags:
`

// options are the parsed flags.
type options struct {
	platform, simRoot, simHostname, simDNSSuffix, simIPv4, cacheFile string
	version                                                          bool
}

// Main runs the agent with args (the command line after the program name,
// an optional "agent" first) on stdin and stdout, and returns the process
// exit code: 0 after a clean end of input, 2 for bad flags, 1 otherwise.
// Messages go to stderr.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "agent" {
		args = args[1:]
	}
	o, err := parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case o.version:
		fmt.Fprintf(stdout, "wsu-agent %s %s/%s\n", version.Version, runtime.GOOS, runtime.GOARCH)
		return 0
	}
	if err := serve(ctx, o, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	return 0
}

// parse reads the flags; errors and -help are reported on stderr.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("wsu-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, Usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.platform, "platform", "native", "native, or sim (a simulated Windows host, for tests and the demo)")
	fs.StringVar(&o.simRoot, "sim-root", "", "directory holding the simulated host's state (--platform sim)")
	fs.StringVar(&o.simHostname, "sim-hostname", "sim-host", "hostname the simulated host reports")
	fs.StringVar(&o.simDNSSuffix, "sim-dns-suffix", "local", "primary DNS suffix of the simulated host: its FQDN is HOSTNAME.SUFFIX")
	fs.StringVar(&o.simIPv4, "sim-ipv4", "127.0.0.1", "IPv4 address the simulated host reports")
	fs.StringVar(&o.cacheFile, "hash-cache", "", "file keeping sha256 results between runs (default: beside the agent binary on Windows, the user cache directory elsewhere, or the sim state)")
	fs.BoolVar(&o.version, "version", false, "print the agent's version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return o, err
	}
	return o, nil
}

// serve serves the chosen backend until in closes or ctx ends.
func serve(ctx context.Context, o options, in io.Reader, out io.Writer) error {
	backend, cacheFile, err := backend(o)
	if err != nil {
		return err
	}
	ctx, stop, halted := untilHalted(ctx, backend)
	defer stop()
	if cacheFile != "" {
		// Warm: a re-run right after a copy finds the sum ready.
		backend = hashcache.Wrap(backend, cacheFile, hashcache.Warm())
	}
	sum, _ := selfSHA256(cacheFile)
	err = agent.Serve(ctx, in, out, backend, agent.ServerInfo{
		Version:  version.Version,
		SHA256:   sum,
		Platform: helloPlatform(o.platform),
	})
	if halted() {
		err = nil // the host went down under us, as a machine does
	}
	// Stops the cache's background hashing before the process ends.
	return errors.Join(err, backend.Close())
}

// halter is a backend that can go down (the simulation after a reboot):
// its connection then ends, as a real machine's does.
type halter interface{ Halted() <-chan struct{} }

// untilHalted ends ctx when the backend goes down, and says whether it
// did; stop releases the watch.
func untilHalted(ctx context.Context, backend host.Host) (_ context.Context, stop func(), halted func() bool) {
	h, ok := backend.(halter)
	if !ok {
		return ctx, func() {}, func() bool { return false }
	}
	ctx, cancel := context.WithCancel(ctx)
	var down atomic.Bool
	go func() {
		select {
		case <-h.Halted():
			down.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel, down.Load
}

// backend is the host the flags choose and the hash cache file it uses
// unless --hash-cache names one.
func backend(o options) (host.Host, string, error) {
	switch o.platform {
	case "native":
		if o.cacheFile == "" {
			o.cacheFile = nativeCacheFile()
		}
		return native.New(), o.cacheFile, nil
	case "sim":
		if o.simRoot == "" {
			return nil, "", fmt.Errorf("--platform sim needs --sim-root DIR")
		}
		h, err := sim.New(o.simRoot, sim.Options{Hostname: o.simHostname, FQDN: o.simHostname + "." + o.simDNSSuffix, IPv4: o.simIPv4})
		if err != nil {
			return nil, "", err
		}
		if o.cacheFile == "" {
			o.cacheFile = filepath.Join(o.simRoot, "state", "hash-cache.json")
		}
		return h, o.cacheFile, nil
	}
	return nil, "", fmt.Errorf("--platform must be native or sim, not %q", o.platform)
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
// elsewhere (a --local run on Linux must not write beside the binary).
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
