// Command wsu-image builds wsu's container images without a container
// daemon (package build/image): the Makefile's image, image-context,
// payload-image and dockerfile targets run it.
//
//	wsu-image context -context DIR              stage the build context (static wsu, CA bundle, passwd, group)
//	wsu-image build -context DIR -o FILE        stage it and build the wsu image archive, and its SBOM
//	                                            (FILE without .tar, .spdx.json)
//	wsu-image payload -context DIR -payload DIR -o FILE
//	                                            the payload image: the wsu image plus a verified payload
//	wsu-image dockerfile                        print the Dockerfile rendered from the same file list
//
// The archive is an OCI image layout with a docker-archive manifest.json
// (docker load, podman load and crane push take it); the manifest digest is
// printed and written to FILE.digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/wsu-project/wsu/build/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wsu-image:", err)
		os.Exit(1)
	}
}

// options are the flags every subcommand shares.
type options struct {
	contextDir, out, payloadDir, repo, version, revision, caBundle string
	epoch                                                          string
	tags                                                           string
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a subcommand: context, build, payload or dockerfile")
	}
	var o options
	fs := flag.NewFlagSet("wsu-image "+args[0], flag.ContinueOnError)
	fs.StringVar(&o.contextDir, "context", "bin/image/context", "build context directory")
	fs.StringVar(&o.out, "o", "", "output archive")
	fs.StringVar(&o.payloadDir, "payload", "", "payload directory (with manifest.json)")
	fs.StringVar(&o.repo, "repo", ".", "the wsu repository")
	fs.StringVar(&o.version, "version", "dev", "wsu version (git describe)")
	fs.StringVar(&o.revision, "revision", "unknown", "commit hash (the revision label)")
	fs.StringVar(&o.caBundle, "ca-bundle", image.DefaultCABundle, "CA bundle to put in the image")
	fs.StringVar(&o.epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp in the image, in Unix seconds (the commit time)")
	fs.StringVar(&o.tags, "tags", "", "comma-separated image names for docker/podman load (default localhost/wsu:latest,localhost/wsu:VERSION)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "dockerfile":
		_, err := os.Stdout.Write(image.Dockerfile(image.WSU()))
		return err
	case "context":
		return stage(ctx, o)
	case "build":
		if err := stage(ctx, o); err != nil {
			return err
		}
		if err := build(o, "localhost/wsu", func(m image.Meta) (v1.Image, error) { return image.Build(o.contextDir, m) }); err != nil {
			return err
		}
		return sbom(o)
	case "payload":
		if o.payloadDir == "" {
			return fmt.Errorf("payload: -payload DIR is required")
		}
		return build(o, "localhost/wsu-payload", func(m image.Meta) (v1.Image, error) {
			base, err := image.Build(o.contextDir, m)
			if err != nil {
				return nil, fmt.Errorf("the wsu image from %s (make image stages it): %w", o.contextDir, err)
			}
			return image.BuildPayload(base, o.payloadDir, m)
		})
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

func stage(ctx context.Context, o options) error {
	return image.Stage(ctx, o.contextDir, image.StageOptions{
		Repo: o.repo, Version: o.version, CABundle: o.caBundle, Log: os.Stderr,
	})
}

func build(o options, repo string, make func(image.Meta) (v1.Image, error)) error {
	if o.out == "" {
		return fmt.Errorf("-o FILE is required")
	}
	created, err := parseEpoch(o.epoch)
	if err != nil {
		return err
	}
	m := image.Meta{Version: o.version, Revision: o.revision, Created: created}
	img, err := make(m)
	if err != nil {
		return err
	}
	tags := []string{repo + ":latest", repo + ":" + o.version}
	if o.tags != "" {
		tags = strings.Split(o.tags, ",")
	}
	digest, err := image.WriteArchive(o.out, img, tags, created)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out+".digest", []byte(digest.String()+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s %s (%s)\n", o.out, digest, strings.Join(tags, ", "))
	return nil
}

// sbom writes the wsu image's SBOM beside its archive: FILE.tar's is
// FILE.spdx.json.
func sbom(o options) error {
	created, err := parseEpoch(o.epoch)
	if err != nil {
		return err
	}
	data, err := image.SBOM(o.contextDir, image.WSU(), image.Meta{Version: o.version, Revision: o.revision, Created: created})
	if err != nil {
		return err
	}
	path := strings.TrimSuffix(o.out, ".tar") + ".spdx.json"
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s (SPDX 2.3 SBOM)\n", path)
	return nil
}

// parseEpoch reads SOURCE_DATE_EPOCH; empty is the Unix epoch, so a build
// without it is still reproducible.
func parseEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("source date epoch %q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
