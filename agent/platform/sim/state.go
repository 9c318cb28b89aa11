package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// Table files under root/state.
const (
	tServices  = "services"
	tProcesses = "processes"
	tRegistry  = "registry"
	tHNS       = "hns"
	tACLs      = "acls"
	tCerts     = "certs"
	tSystem    = "system"
	tFirewall  = "firewall"
)

type svcRecord struct {
	Config   host.ServiceConfig    `json:"config"`
	Recovery *host.ServiceRecovery `json:"recovery,omitempty"`
}

// svcTable is keyed by the lower-cased name: the SCM ignores case.
type svcTable struct {
	Services map[string]*svcRecord `json:"services"`
}

// procRecord is a process of the simulated host. A real one is a Linux
// process, identified by pid and start time so a reused pid is never
// mistaken for it; a synthetic one exists only in this table.
type procRecord struct {
	PID     int    `json:"pid"`
	Image   string `json:"image"`
	Real    bool   `json:"real,omitempty"`
	Start   uint64 `json:"start,omitempty"`   // /proc/<pid>/stat starttime
	Service string `json:"service,omitempty"` // the service it runs
	Binary  string `json:"binary,omitempty"`  // local path of the image, in use while it runs
}

type procTable struct {
	NextPID int          `json:"next_pid"`
	Procs   []procRecord `json:"procs"`
}

type regValue struct {
	Name  string             `json:"name"`
	Value host.RegistryValue `json:"value"`
}

type regKey struct {
	Path   string               `json:"path"`   // as first written
	Values map[string]*regValue `json:"values"` // by lower-cased name
}

// regTable is keyed by the canonical, lower-cased key path.
type regTable struct {
	Keys map[string]*regKey `json:"keys"`
}

type hnsTable struct {
	Networks  []host.HNSNetwork  `json:"networks"`
	Endpoints []host.HNSEndpoint `json:"endpoints"`
}

// tx is one locked look at the tables: each is read at most once and the
// changed ones are written back when an update ends.
type tx struct {
	h      *Host
	write  bool
	tables map[string]any
	dirty  map[string]bool
	pruned bool
}

// view runs fn under a shared lock.
func (h *Host) view(fn func(*tx) error) error {
	return h.withLock(false, func() error {
		return fn(&tx{h: h, tables: map[string]any{}, dirty: map[string]bool{}})
	})
}

// update runs fn under the exclusive lock and then writes the changed
// tables, even when fn fails: fn changes a table only for what has really
// happened (a dependency that did start stays recorded).
func (h *Host) update(fn func(*tx) error) error {
	return h.withLock(true, func() error {
		t := &tx{h: h, write: true, tables: map[string]any{}, dirty: map[string]bool{}}
		err := fn(t)
		return errors.Join(err, t.commit())
	})
}

// withLock holds the root's lock file: two agents may share a root.
func (h *Host) withLock(exclusive bool, fn func() error) error {
	f, err := os.OpenFile(filepath.Join(h.stateDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("sim: lock: %w", err)
	}
	defer f.Close() // closing releases the lock
	if err := lockFile(f, exclusive); err != nil {
		return fmt.Errorf("sim: lock: %w", err)
	}
	return fn()
}

func (t *tx) mark(name string) { t.dirty[name] = true }

func (t *tx) commit() error {
	var errs []error
	for name := range t.dirty {
		b, err := json.MarshalIndent(t.tables[name], "", "  ")
		if err == nil {
			err = writeAtomic(filepath.Join(t.h.stateDir, name+".json"), b)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sim: save %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// table loads a table once per tx; a missing file is an empty table.
func table[T any](t *tx, name string) (*T, error) {
	if v, ok := t.tables[name]; ok {
		return v.(*T), nil
	}
	v := new(T)
	b, err := os.ReadFile(filepath.Join(t.h.stateDir, name+".json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("sim: load %s: %w", name, err)
	default:
		if err := json.Unmarshal(b, v); err != nil {
			return nil, fmt.Errorf("sim: load %s: %w", name, err)
		}
	}
	t.tables[name] = v
	return v, nil
}

func (t *tx) services() (*svcTable, error) {
	s, err := table[svcTable](t, tServices)
	if err == nil && s.Services == nil {
		s.Services = map[string]*svcRecord{}
	}
	return s, err
}

// processes loads the process table; an update also forgets the real
// processes that have exited since.
func (t *tx) processes() (*procTable, error) {
	p, err := table[procTable](t, tProcesses)
	if err != nil {
		return nil, err
	}
	if t.write && !t.pruned {
		t.pruned = true
		live := p.Procs[:0]
		for _, r := range p.Procs {
			if r.alive() {
				live = append(live, r)
			}
		}
		if len(live) != len(p.Procs) {
			p.Procs = live
			t.mark(tProcesses)
		}
	}
	return p, nil
}

func (t *tx) registry() (*regTable, error) {
	r, err := table[regTable](t, tRegistry)
	if err == nil && r.Keys == nil {
		r.Keys = map[string]*regKey{}
	}
	return r, err
}

// hns loads the HNS table, which exists only while the Containers
// feature is in effect.
func (t *tx) hns() (*hnsTable, error) {
	if err := t.hnsReady(); err != nil {
		return nil, err
	}
	return table[hnsTable](t, tHNS)
}

// writeAtomic replaces path with data: temp file, fsync, rename.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return osfs.SyncDir(dir)
}
