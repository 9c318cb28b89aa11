package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wsu-project/wsu/payload"
)

// Meta is what varies between builds: the commit and its time.
type Meta struct {
	// Version is wsu's version (git describe), the version label.
	Version string
	// Revision is the full commit hash, the revision label.
	Revision string
	// Created is every timestamp in the image: the commit's time
	// (SOURCE_DATE_EPOCH), never the build's.
	Created time.Time
}

// Build assembles the wsu image from a context Stage wrote: one layer with
// WSU's files, the config (user, entrypoint, environment, labels), for
// linux/amd64. Docker media types, so that `crane push` of the archive
// pushes exactly this manifest (ggcr reads a docker-archive as Docker
// types) and the printed digest is the pushed one.
func Build(contextDir string, m Meta) (v1.Image, error) {
	s := WSU()
	var files []layerFile
	for _, f := range s.Files {
		files = append(files, layerFile{src: filepath.Join(contextDir, f.Src), dest: f.Dest, mode: f.Mode})
	}
	layer, err := newLayer(files, m.Created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		LabelTitle:    "wsu",
		LabelSource:   Source,
		LabelVersion:  m.Version,
		LabelRevision: m.Revision,
	}
	return withLayer(empty.Image, s, labels, layer, m.Created, "wsu image files (build/image WSU)")
}

// BuildPayload layers a payload directory onto the wsu image: the files its
// manifest.json lists, and the manifest, under /payload, each checked
// against the manifest's sha256 first (a directory that does not match is
// refused). The entrypoint is `wsu payload copy` (Payload).
func BuildPayload(base v1.Image, dir string, m Meta) (v1.Image, error) {
	man, err := payload.Load(dir)
	if err != nil {
		return nil, err
	}
	problems, err := payload.Verify(dir, man)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("payload %s does not match its manifest: %v (`wsu payload fetch %s` completes it)", dir, problems, dir)
	}
	files := []layerFile{{src: filepath.Join(dir, payload.ManifestFile), dest: PayloadDir + "/" + payload.ManifestFile, mode: 0o644}}
	for _, c := range man.Components {
		files = append(files, layerFile{src: filepath.Join(dir, c.File), dest: PayloadDir + "/" + c.File, mode: 0o644})
	}
	layer, err := newLayer(files, m.Created)
	if err != nil {
		return nil, err
	}
	cfg, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	labels := map[string]string{LabelTitle: "wsu-payload", LabelPayloadVersion: man.Version}
	for k, v := range cfg.Config.Labels {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	return withLayer(base, Payload(), labels, layer, m.Created, "payload "+man.Version)
}

// withLayer sets the config from s and labels on base and appends layer.
func withLayer(base v1.Image, s Spec, labels map[string]string, layer v1.Layer, created time.Time, createdBy string) (v1.Image, error) {
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: created}
	cfg.Config.User = s.User
	cfg.Config.Entrypoint = s.Entrypoint
	cfg.Config.Cmd = s.Cmd
	cfg.Config.Env = s.Env
	cfg.Config.WorkingDir = s.WorkingDir
	cfg.Config.Labels = labels
	img, err := mutate.ConfigFile(base, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.DockerLayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: createdBy},
	})
}

// layerFile is one file of a layer: read from src, written at dest.
type layerFile struct {
	src, dest string
	mode      int64
}

// newLayer writes a gzipped layer tar: the files and their parent
// directories (0755), sorted by path, owned by 0:0, every time set to
// created. The same files give the same bytes.
func newLayer(files []layerFile, created time.Time) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].dest < files[j].dest })
	dests := make([]string, len(files))
	for i, f := range files {
		dests[i] = f.dest
	}
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, d := range dirs(dests) {
		if err := tw.WriteHeader(header(tarName(d)+"/", tar.TypeDir, 0o755, 0, created)); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := addFile(tw, f, created); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.DockerLayer))
}

func addFile(tw *tar.Writer, f layerFile, created time.Time) error {
	in, err := os.Open(f.src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", f.src)
	}
	if err := tw.WriteHeader(header(tarName(f.dest), tar.TypeReg, f.mode, st.Size(), created)); err != nil {
		return err
	}
	if _, err := io.Copy(tw, in); err != nil {
		return fmt.Errorf("%s: %w", f.src, err)
	}
	return nil
}

// header is a tar header with nothing from the build machine in it.
func header(name string, typ byte, mode, size int64, created time.Time) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     mode,
		Size:     size,
		ModTime:  created.UTC().Truncate(time.Second),
	}
}
