//go:build !unix

package payloadtest

import (
	"fmt"
	"os"
)

// processDir makes this process's directory for compiled stand-ins; without
// flock nothing removes it later.
func processDir() (string, error) {
	dir, err := os.MkdirTemp("", "wsu-payloadtest-*")
	if err != nil {
		return "", fmt.Errorf("payloadtest: %w", err)
	}
	return dir, nil
}
