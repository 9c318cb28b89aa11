package local

// testify cannot build in this module yet: go.sum lacks go.yaml.in/yaml/v3,
// which testify's assert package imports. These shims mirror the subset of
// its API the tests use; once go.sum is fixed, delete this file and import
// github.com/stretchr/testify/{assert,require} instead.

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

type checker struct{ fatal bool }

var (
	assert  = checker{}
	require = checker{fatal: true}
)

func (c checker) fail(t testing.TB, msg string, extra []any) {
	t.Helper()
	if len(extra) > 0 {
		if f, ok := extra[0].(string); ok {
			msg += ": " + fmt.Sprintf(f, extra[1:]...)
		}
	}
	if c.fatal {
		t.Fatal(msg)
	}
	t.Error(msg)
}

func (c checker) NoError(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err != nil {
		c.fail(t, fmt.Sprintf("unexpected error: %v", err), msg)
	}
}

func (c checker) Error(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err == nil {
		c.fail(t, "expected an error", msg)
	}
}

func (c checker) ErrorIs(t testing.TB, err, target error, msg ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		c.fail(t, fmt.Sprintf("error %v is not %v", err, target), msg)
	}
}

func (c checker) ErrorContains(t testing.TB, err error, sub string, msg ...any) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		c.fail(t, fmt.Sprintf("error %v does not contain %q", err, sub), msg)
	}
}

func (c checker) Equal(t testing.TB, want, got any, msg ...any) {
	t.Helper()
	wb, wok := want.([]byte)
	gb, gok := got.([]byte)
	if (wok && gok && bytes.Equal(wb, gb)) || reflect.DeepEqual(want, got) {
		return
	}
	c.fail(t, fmt.Sprintf("want %#v, got %#v", want, got), msg)
}

func (c checker) True(t testing.TB, v bool, msg ...any) {
	t.Helper()
	if !v {
		c.fail(t, "expected true", msg)
	}
}

func (c checker) False(t testing.TB, v bool, msg ...any) {
	t.Helper()
	if v {
		c.fail(t, "expected false", msg)
	}
}

func (c checker) Empty(t testing.TB, v any, msg ...any) {
	t.Helper()
	if rv := reflect.ValueOf(v); v != nil && !rv.IsZero() && !(isSized(rv) && rv.Len() == 0) {
		c.fail(t, fmt.Sprintf("expected empty, got %#v", v), msg)
	}
}

func (c checker) NotEmpty(t testing.TB, v any, msg ...any) {
	t.Helper()
	if rv := reflect.ValueOf(v); v == nil || rv.IsZero() || (isSized(rv) && rv.Len() == 0) {
		c.fail(t, "expected a non-empty value", msg)
	}
}

func (c checker) Len(t testing.TB, v any, n int, msg ...any) {
	t.Helper()
	if rv := reflect.ValueOf(v); !isSized(rv) || rv.Len() != n {
		c.fail(t, fmt.Sprintf("expected length %d, got %#v", n, v), msg)
	}
}

func (c checker) Less(t testing.TB, a, b time.Duration, msg ...any) {
	t.Helper()
	if a >= b {
		c.fail(t, fmt.Sprintf("expected %v < %v", a, b), msg)
	}
}

func isSized(rv reflect.Value) bool {
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.String, reflect.Array, reflect.Chan:
		return true
	}
	return false
}
