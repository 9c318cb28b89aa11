//go:build linux

package podrunner

import (
	"archive/tar"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageFile is one file of a test image.
type ImageFile struct {
	// Path inside the image, absolute.
	Path string
	// Source is a file on this machine to copy; Data is used when it is
	// empty.
	Source string
	Data   []byte
	Mode   int64
}

// WriteImage writes a one-layer image of files with config (entrypoint,
// env, user...) to a tarball at out, tagged ref, for tests: the pod runner
// runs it when Options.Images maps ref to out. Directories are added for
// every parent; timestamps are fixed, so the same input gives the same
// image.
func WriteImage(out, ref string, files []ImageFile, config v1.Config) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("podrunner: image reference %q: %w", ref, err)
	}
	// The layer goes through a file: images of wsu with a payload are
	// hundreds of megabytes.
	layerFile := out + ".layer.tar"
	defer os.Remove(layerFile)
	if err := writeLayer(layerFile, files); err != nil {
		return err
	}
	layer, err := tarball.LayerFromFile(layerFile)
	if err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Config = config
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("podrunner: writing %s: %w", out, err)
	}
	return nil
}

// writeLayer writes the layer's tar: parent directories first, then files,
// in path order.
func writeLayer(out string, files []ImageFile) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(path.Clean(f.Path)); d != "/" && d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	tw := tar.NewWriter(f)
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	slices.Sort(dirList)
	for _, d := range dirList {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: epoch}); err != nil {
			return err
		}
	}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b ImageFile) int { return strings.Compare(a.Path, b.Path) })
	for _, file := range sorted {
		data := file.Data
		if file.Source != "" {
			var err error
			if data, err = os.ReadFile(file.Source); err != nil {
				return fmt.Errorf("podrunner: %w", err)
			}
		}
		mode := file.Mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path.Clean(file.Path), "/"), Mode: mode, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}
