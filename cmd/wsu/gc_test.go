package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGCPercent(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	p, ok := gcPercent(env(nil))
	assert.True(t, ok)
	assert.Equal(t, 50, p, "the CLI's default")
	_, ok = gcPercent(env(map[string]string{"GOGC": "200"}))
	assert.False(t, ok, "GOGC set by the user stands")
	_, ok = gcPercent(env(map[string]string{"GOGC": "off"}))
	assert.False(t, ok)
}
