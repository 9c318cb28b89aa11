package image

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Dockerfile renders s as the Dockerfile for sites that build with Docker
// (or podman/buildah): FROM scratch, one COPY per file from the build
// context Stage writes, the same user, environment, entrypoint and labels
// as Build. The repository's Dockerfile is this, for WSU().
func Dockerfile(s Spec) []byte {
	var b bytes.Buffer
	b.WriteString(`# syntax=docker/dockerfile:1
# GENERATED from build/image (WSU in spec.go) by make dockerfile: do not edit.
# The same image as make image builds without a daemon; the build context is
# the directory make image-context stages (the static wsu, the CA bundle,
# passwd and group):
#   make image-context
#   docker build -f Dockerfile -t wsu \
#     --build-arg VERSION=$(git describe --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) bin/image/context
# COPY --chmod needs BuildKit (Docker 23+, podman/buildah).
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
`)
	for _, f := range s.Files {
		fmt.Fprintf(&b, "COPY --chmod=%04o %s %s\n", f.Mode, f.Src, f.Dest)
	}
	for _, e := range s.Env {
		fmt.Fprintf(&b, "ENV %s\n", e)
	}
	fmt.Fprintf(&b, "WORKDIR %s\n", s.WorkingDir)
	fmt.Fprintf(&b, "USER %s\n", s.User)
	fmt.Fprintf(&b, "ENTRYPOINT %s\n", jsonArray(s.Entrypoint))
	if len(s.Cmd) > 0 {
		fmt.Fprintf(&b, "CMD %s\n", jsonArray(s.Cmd))
	}
	fmt.Fprintf(&b, "LABEL %s=%q \\\n      %s=\"$VERSION\" \\\n      %s=\"$REVISION\" \\\n      %s=%q\n",
		LabelTitle, "wsu", LabelVersion, LabelRevision, LabelSource, Source)
	return b.Bytes()
}

func jsonArray(a []string) string {
	out, _ := json.Marshal(a) // strings always marshal
	return string(out)
}

// Copy is one COPY line of a Dockerfile.
type Copy struct {
	Src, Dest string
	// Mode is the --chmod value, -1 when there is none.
	Mode int64
}

// ParseCopies reads a Dockerfile's COPY lines (the forms Dockerfile writes:
// options, then one source and one destination; no continuations).
func ParseCopies(dockerfile []byte) ([]Copy, error) {
	var out []Copy
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || !strings.EqualFold(fields[0], "COPY") {
			continue
		}
		c := Copy{Mode: -1}
		var args []string
		for _, f := range fields[1:] {
			switch {
			case strings.HasPrefix(f, "--chmod="):
				m, err := strconv.ParseInt(strings.TrimPrefix(f, "--chmod="), 8, 32)
				if err != nil {
					return nil, fmt.Errorf("line %d: %s: %w", n, f, err)
				}
				c.Mode = m
			case strings.HasPrefix(f, "--"):
				return nil, fmt.Errorf("line %d: COPY option %s is not one this parser knows", n, f)
			default:
				args = append(args, f)
			}
		}
		if len(args) != 2 {
			return nil, fmt.Errorf("line %d: COPY wants one source and one destination, has %d paths", n, len(args))
		}
		c.Src, c.Dest = args[0], args[1]
		out = append(out, c)
	}
	return out, sc.Err()
}
