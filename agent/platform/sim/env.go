package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wsu-project/wsu/host"
)

// The machine environment is the registry's Environment key, as on
// Windows, so registry and environment views of it agree.

func (h *Host) EnvGet(ctx context.Context, name string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	if err := envName(name); err != nil {
		return "", false, err
	}
	v, err := h.RegistryGet(ctx, envKey, name)
	if err != nil {
		return "", false, err
	}
	if !v.Exists {
		return "", false, nil
	}
	if v.Type != host.RegSZ && v.Type != host.RegExpandSZ {
		return "", false, fmt.Errorf("environment variable %s is a %s, not a string", name, v.Type)
	}
	return v.String, true, nil
}

// EnvSet keeps the value's registry type when it is a string already; a
// new value is REG_EXPAND_SZ when it references another variable.
func (h *Host) EnvSet(ctx context.Context, name, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := envName(name); err != nil {
		return err
	}
	return h.update(func(t *tx) error {
		old, err := t.regGet(envKey, name)
		if err != nil {
			return err
		}
		typ := host.RegSZ
		if old.Exists && old.Type == host.RegExpandSZ || !old.Exists && strings.Contains(value, "%") {
			typ = host.RegExpandSZ
		}
		return t.regSet(envKey, name, host.RegistryValue{Type: typ, String: value})
	})
}

func (h *Host) EnvDelete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := envName(name); err != nil {
		return err
	}
	return h.RegistryDelete(ctx, envKey, name)
}

func envName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("invalid environment variable name %q", name)
	}
	return nil
}

// samePathEntry compares PATH entries as Windows users mean them: case
// ignored, a trailing backslash ignored.
func samePathEntry(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, `\`), strings.TrimRight(b, `\`))
}

// editPath applies edit to the machine PATH's entries and writes the result
// back as REG_EXPAND_SZ if edit changed anything.
func (h *Host) editPath(ctx context.Context, op, dir string, edit func([]string) ([]string, bool)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if strings.TrimRight(dir, `\`) == "" || strings.ContainsAny(dir, ";\x00") {
		return false, fmt.Errorf("machine PATH %s: invalid directory %q", op, dir)
	}
	changed := false
	err := h.update(func(t *tx) error {
		v, err := t.regGet(envKey, "Path")
		if err != nil {
			return err
		}
		if v.Exists && v.Type != host.RegSZ && v.Type != host.RegExpandSZ {
			return errors.New("the Path value is not a string")
		}
		var entries []string
		if v.String != "" {
			entries = strings.Split(v.String, ";")
		}
		entries, changed = edit(entries)
		if !changed {
			return nil
		}
		return t.regSet(envKey, "Path", host.RegistryValue{Type: host.RegExpandSZ, String: strings.Join(entries, ";")})
	})
	if err != nil {
		return false, fmt.Errorf("machine PATH %s %s: %w", op, dir, err)
	}
	return changed, nil
}

// PathAdd appends dir unless an equal entry is there, keeping the order.
func (h *Host) PathAdd(ctx context.Context, dir string) (bool, error) {
	return h.editPath(ctx, "add", dir, func(entries []string) ([]string, bool) {
		for _, e := range entries {
			if samePathEntry(e, dir) {
				return entries, false
			}
		}
		// A trailing ';' leaves an empty last entry: fill it, do not add a
		// second separator.
		if n := len(entries); n > 0 && entries[n-1] == "" {
			entries = entries[:n-1]
		}
		return append(entries, dir), true
	})
}

// PathRemove removes every entry equal to dir, keeping the others as they
// are.
func (h *Host) PathRemove(ctx context.Context, dir string) (bool, error) {
	return h.editPath(ctx, "remove", dir, func(entries []string) ([]string, bool) {
		kept := entries[:0:0]
		for _, e := range entries {
			if !samePathEntry(e, dir) {
				kept = append(kept, e)
			}
		}
		return kept, len(kept) != len(entries)
	})
}
