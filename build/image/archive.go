package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// WriteArchive writes img to path as one tarball that docker load, podman
// load and crane push all take: an OCI image layout (oci-layout, index.json,
// blobs/sha256/...) with the docker-archive manifest.json beside it naming
// the same blobs, as `docker save` writes since Docker 25. tags (e.g.
// localhost/wsu:latest) name the image for docker and podman load. Entries
// are sorted and timestamped created, so the archive is as reproducible as
// the image. It returns the image's manifest digest.
func WriteArchive(path string, img v1.Image, tags []string, created time.Time) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	blobs, err := imageBlobs(img)
	if err != nil {
		return v1.Hash{}, err
	}
	meta, err := layoutFiles(img, tags)
	if err != nil {
		return v1.Hash{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".wsu-image-*.tar")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.Remove(tmp.Name())
	if err := writeTar(tmp, blobs, meta, created); err != nil {
		tmp.Close()
		return v1.Hash{}, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return v1.Hash{}, err
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, err
	}
	return digest, os.Rename(tmp.Name(), path)
}

// blob is one content-addressed file: its digest and how to read it.
type blob struct {
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
}

func bytesBlob(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// imageBlobs are the config, the layers (compressed) and the manifest.
func imageBlobs(img v1.Image) ([]blob, error) {
	var out []blob
	add := func(raw []byte) {
		h, n, _ := v1.SHA256(bytes.NewReader(raw)) // reading from memory does not fail
		out = append(out, blob{h, n, bytesBlob(raw)})
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	add(cfg)
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		n, err := l.Size()
		if err != nil {
			return nil, err
		}
		out = append(out, blob{d, n, l.Compressed})
	}
	man, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	add(man)
	return out, nil
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// layoutFiles are oci-layout, index.json (one entry per tag, annotated as
// docker save does) and the docker-archive manifest.json.
func layoutFiles(img v1.Image, tags []string) (map[string][]byte, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	size, err := img.Size()
	if err != nil {
		return nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	man, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json"}
	repoTags := []string{}
	for _, t := range tags {
		tag, err := name.NewTag(t)
		if err != nil {
			return nil, fmt.Errorf("tag %q: %w", t, err)
		}
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: mt, Size: size, Digest: digest,
			Annotations: map[string]string{
				"io.containerd.image.name":          tag.Name(),
				"org.opencontainers.image.ref.name": tag.TagStr(),
			},
		})
		repoTags = append(repoTags, t)
	}
	if len(tags) == 0 {
		index.Manifests = []v1.Descriptor{{MediaType: mt, Size: size, Digest: digest}}
	}
	layers := make([]string, len(man.Layers))
	for i, l := range man.Layers {
		layers[i] = blobPath(l.Digest)
	}
	docker := []map[string]any{{"Config": blobPath(cfgName), "RepoTags": repoTags, "Layers": layers}}
	out := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`)}
	if out["index.json"], err = json.Marshal(index); err != nil {
		return nil, err
	}
	if out["manifest.json"], err = json.Marshal(docker); err != nil {
		return nil, err
	}
	return out, nil
}

// writeTar writes the blobs and the layout files, sorted by name.
func writeTar(w io.Writer, blobs []blob, meta map[string][]byte, created time.Time) error {
	files := map[string]blob{}
	for _, b := range blobs {
		files[blobPath(b.digest)] = b
	}
	for n, data := range meta {
		h, size, _ := v1.SHA256(bytes.NewReader(data))
		files[n] = blob{h, size, bytesBlob(data)}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(header(d, tar.TypeDir, 0o755, 0, created)); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := writeBlob(tw, n, files[n], created); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeBlob(tw *tar.Writer, n string, b blob, created time.Time) error {
	if err := tw.WriteHeader(header(n, tar.TypeReg, 0o644, b.size, created)); err != nil {
		return err
	}
	r, err := b.open()
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("%s: %w", n, err)
	}
	return nil
}
