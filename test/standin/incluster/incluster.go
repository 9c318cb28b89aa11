// Package incluster gives TEST STAND-INs that play HostProcess pods
// (calicowindows, kubeproxy) the API client a real one builds with
// client-go's rest.InClusterConfig, from the same inputs: the
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT environment and the
// ServiceAccount token and CA under the container's mount point. A
// HostProcess container sees its volumes under
// $CONTAINER_SANDBOX_MOUNT_POINT rather than at /var/run/secrets, so the
// directory is taken relative to it (a Windows path, translated through
// the simulated host); rest.InClusterConfig itself would look at the
// fixed Linux path.
package incluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/wsu-project/wsu/test/standin/simhost"
)

// The environment a HostProcess container is given.
const (
	EnvSandbox     = "CONTAINER_SANDBOX_MOUNT_POINT"
	EnvServiceHost = "KUBERNETES_SERVICE_HOST"
	EnvServicePort = "KUBERNETES_SERVICE_PORT"
)

// TokenDir is where the ServiceAccount volume is mounted in a container,
// relative to the sandbox mount point for HostProcess containers.
const TokenDir = `var\run\secrets\kubernetes.io\serviceaccount`

// SandboxPath is rel (a path with either separator) under the
// container's mount point, as a Windows path when the mount point is one.
func SandboxPath(rel string) (string, error) {
	root := os.Getenv(EnvSandbox)
	if root == "" {
		return "", fmt.Errorf("%s is not set: not a HostProcess container", EnvSandbox)
	}
	rel = strings.TrimLeft(rel, `/\`)
	if simhost.IsWindows(root) {
		return strings.TrimRight(root, `/\`) + `\` + strings.ReplaceAll(rel, "/", `\`), nil
	}
	return strings.TrimRight(root, "/") + "/" + strings.ReplaceAll(rel, `\`, "/"), nil
}

// Config is the in-cluster client configuration: the API server from the
// environment, the token file (re-read as client-go does, so a refreshed
// token is used) and the CA from the ServiceAccount directory.
func Config(paths *simhost.Paths) (*rest.Config, error) {
	host, port := os.Getenv(EnvServiceHost), os.Getenv(EnvServicePort)
	if host == "" || port == "" {
		return nil, errors.New("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined")
	}
	dir, err := SandboxPath(TokenDir)
	if err != nil {
		return nil, err
	}
	local, err := paths.Local(dir)
	if err != nil {
		return nil, err
	}
	token, ca := filepath.Join(local, "token"), filepath.Join(local, "ca.crt")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("ServiceAccount token: %w", err)
	}
	if _, err := os.Stat(ca); err != nil {
		return nil, fmt.Errorf("ServiceAccount CA: %w", err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		BearerTokenFile: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca},
	}, nil
}
