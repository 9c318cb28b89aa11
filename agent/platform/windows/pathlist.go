package windows

import (
	"errors"
	"strings"
)

// samePathEntry compares PATH entries the way Windows resolves them:
// case-insensitively, with or without a trailing backslash.
func samePathEntry(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if len(s) > 1 && strings.HasSuffix(s, `\`) && !strings.HasSuffix(s, `:\`) {
			s = strings.TrimRight(s, `\`)
		}
		return s
	}
	return strings.EqualFold(norm(a), norm(b))
}

func checkPathDir(dir string) error {
	switch {
	case strings.TrimSpace(dir) == "":
		return errors.New("empty directory")
	case strings.Contains(dir, ";"):
		return errors.New("a PATH entry cannot contain ';'")
	}
	return nil
}

// pathAdd appends dir to a ;-separated list unless an equal entry is there.
// Other entries are kept byte for byte.
func pathAdd(list, dir string) (string, bool) {
	for _, e := range strings.Split(list, ";") {
		if samePathEntry(e, dir) {
			return list, false
		}
	}
	if list == "" {
		return dir, true
	}
	if strings.HasSuffix(list, ";") {
		return list + dir, true
	}
	return list + ";" + dir, true
}

// pathRemove drops every entry equal to dir, keeping the rest as they were.
func pathRemove(list, dir string) (string, bool) {
	entries := strings.Split(list, ";")
	kept := entries[:0]
	for _, e := range entries {
		if !samePathEntry(e, dir) {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(entries) {
		return list, false
	}
	return strings.Join(kept, ";"), true
}
