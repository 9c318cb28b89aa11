// Package image builds wsu's container images without a container daemon or
// a base image (none can be pulled where wsu is built and tested): the
// layers are tar files written here, entry by entry, and
// github.com/google/go-containerregistry assembles the image.
//
// WSU is the single list of what the wsu image holds. The Dockerfile at the
// repository root is rendered from it (Dockerfile), for sites that build
// with Docker, and a test keeps the checked-in file identical; another opens
// the built image and checks that what the Dockerfile lists is there.
//
// What other parts rely on (keep it stable): make image writes
// bin/wsu-image.tar (and its digest to bin/wsu-image.tar.digest), make
// payload-image bin/wsu-payload-image.tar; each is an OCI image layout with
// a docker-archive manifest.json beside it, naming the image
// localhost/wsu:latest (localhost/wsu-payload:latest), the names the deploy/
// manifests use. Tests that need the image call Stage, Build and
// WriteArchive themselves, as this package's tests do.
//
// Builds are reproducible: every timestamp is the commit's (SOURCE_DATE_EPOCH
// when set), entries are sorted, owners are 0:0 and modes are fixed, and
// the binaries are built with -trimpath; so one commit gives one digest.
package image

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// File is one file of an image, taken from the build context.
type File struct {
	// Src is the file's name in the build context (Stage writes it).
	Src string
	// Dest is its absolute path in the image.
	Dest string
	// Mode is its permission bits.
	Mode int64
}

// Spec is what an image holds and how it starts.
type Spec struct {
	Files      []File
	User       string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
}

// Build context names (Stage writes these files).
const (
	CtxWSU = "wsu"
	// CtxWSUController is the cluster face (cmd/wsu-controller).
	CtxWSUController = "wsu-controller"
	CtxCABundle      = "ca-certificates.crt"
	CtxPasswd        = "passwd"
	CtxGroup         = "group"
)

// Paths in the image.
const (
	WSUPath = "/usr/local/bin/wsu"
	// WSUControllerPath is the cluster face, which the Deployment and the
	// run Jobs start (command); `wsu controller` finds it beside wsu.
	WSUControllerPath = "/usr/local/bin/wsu-controller"
	// CABundlePath is where Go's crypto/x509 looks first on Linux.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// PayloadDir is where a payload image holds the payload.
	PayloadDir = "/payload"
	// PayloadTarget is where the deploy/ manifests have the payload image's
	// init container copy it (an emptyDir).
	PayloadTarget = "/var/lib/wsu/payload"
)

// NonRootUID is the image's user and group: not root, and the ID that
// distroless images use for "nonroot", so site policies that expect it
// recognise it.
const NonRootUID = 65532

// Label keys (the OCI annotation names, set as image labels).
const (
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	LabelTitle    = "org.opencontainers.image.title"
	// LabelPayloadVersion names the payload a payload image carries.
	LabelPayloadVersion = "dev.wsu.payload.version"
)

// Source is the project's repository, the org.opencontainers.image.source label.
const Source = "https://github.com/wsu-project/wsu"

// WSU is the wsu image: the static wsu and wsu-controller binaries (which
// carry the node agents they deploy and the stock playbooks), a CA bundle for HTTPS
// (payload fetch, the cluster when its CA is a public one), and the
// passwd/group files that name the non-root user.
func WSU() Spec {
	uid := fmt.Sprint(NonRootUID)
	return Spec{
		Files: []File{
			{Src: CtxPasswd, Dest: "/etc/passwd", Mode: 0o644},
			{Src: CtxGroup, Dest: "/etc/group", Mode: 0o644},
			{Src: CtxCABundle, Dest: CABundlePath, Mode: 0o644},
			{Src: CtxWSU, Dest: WSUPath, Mode: 0o755},
			{Src: CtxWSUController, Dest: WSUControllerPath, Mode: 0o755},
		},
		User:       uid + ":" + uid,
		Entrypoint: []string{WSUPath},
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=" + CABundlePath,
		},
		WorkingDir: "/",
	}
}

// Payload is the payload image's start: `wsu payload copy /payload DEST`,
// which verifies every file against the manifest while copying it (the
// init container of deploy/'s Deployment and Job).
func Payload() Spec {
	s := WSU()
	s.Files = nil
	s.Entrypoint = []string{WSUPath, "payload", "copy"}
	s.Cmd = []string{PayloadDir, PayloadTarget}
	return s
}

// Passwd and Group are the image's /etc/passwd and /etc/group: root (for
// tools that expect it) and the non-root user wsu runs as. Its home is /tmp,
// which the deploy/ manifests mount as an emptyDir: the root filesystem is
// read-only.
func Passwd() string {
	return fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/tmp:/sbin/nologin\n", NonRootUID, NonRootUID)
}

// Group: see Passwd.
func Group() string {
	return fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
}

// dirs returns the parent directories of the files, sorted, without "/".
func dirs(files []string) []string {
	seen := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f); d != "/" && d != "."; d = path.Dir(d) {
			seen[d] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// tarName is a path as a layer tar names it: relative to the root.
func tarName(p string) string { return strings.TrimPrefix(p, "/") }
