//go:build !unix

package main

// processReplacer is nil where a process cannot be replaced (Windows): a
// forwarded program then runs as a child (forwardController).
func processReplacer() func(path string, argv, env []string) error { return nil }
