// Package agents is where wsu and wsu-controller find the node agent builds
// they deploy: the builds make build embeds (-tags wsu_embed_agents), else
// bin/wsu-agent-* beside the program, else (for its own platform) the
// program itself when it is wsu (`wsu agent`). One package, so both
// binaries carry the same builds and look for them the same way.
package agents

import (
	"os"
	"path/filepath"

	"github.com/wsu-project/wsu/transport/agentbin"
)

// Options say where this program finds the agents it deploys. self names
// the program that serves as its own platform's agent (`wsu agent`) when
// no build is embedded or beside it: this program's file name in its
// directory ("wsu" for wsu, the wsu beside it for wsu-controller), used
// when that file exists. Each run makes its own agentbin.Source from them.
func Options(self string) *agentbin.Options {
	o := &agentbin.Options{Embedded: Embedded()}
	if exe, err := os.Executable(); err == nil {
		o.Dir = filepath.Dir(exe)
		if self == filepath.Base(exe) {
			o.Self = exe
		} else if f := filepath.Join(o.Dir, self); fileExists(f) {
			o.Self = f
		}
	}
	if dir, err := os.UserCacheDir(); err == nil {
		o.CacheDir = filepath.Join(dir, "wsu", "agents")
	}
	return o
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
