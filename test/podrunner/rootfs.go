//go:build linux

package podrunner

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// loadImage opens an image file: a tarball as `docker save` or crane write
// it (one image), or an OCI image layout directory (its first image).
func loadImage(p string) (v1.Image, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return tarball.ImageFromPath(p, nil)
	}
	idx, err := layout.ImageIndexFromPath(p)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, fmt.Errorf("the OCI layout %s holds no image", p)
	}
	return idx.Image(m.Manifests[0].Digest)
}

// unpack writes img's flattened file system (layers in order, whiteouts
// applied: mutate.Extract) under root, which must exist.
func unpack(img v1.Image, root string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the image: %w", err)
		}
		if err := writeEntry(root, hdr, tr); err != nil {
			return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
		}
	}
}

func writeEntry(root string, hdr *tar.Header, r io.Reader) error {
	clean := path.Clean("/" + hdr.Name)
	if clean == "/" {
		return nil
	}
	parent, err := resolveIn(root, path.Dir(clean))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	target := filepath.Join(parent, path.Base(clean))
	mode := os.FileMode(hdr.Mode) & os.ModePerm
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, mode); err != nil {
			return err
		}
		if err := os.Chmod(target, mode|os.FileMode(hdr.Mode)&(os.ModeSticky)); err != nil {
			return err
		}
	case tar.TypeReg:
		os.Remove(target)
		f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.Chmod(target, tarMode(hdr)); err != nil {
			return err
		}
	case tar.TypeSymlink:
		os.Remove(target)
		if err := os.Symlink(hdr.Linkname, target); err != nil {
			return err
		}
	case tar.TypeLink:
		src, err := resolveIn(root, path.Clean("/"+hdr.Linkname))
		if err != nil {
			return err
		}
		os.Remove(target)
		if err := os.Link(src, target); err != nil {
			return err
		}
	default:
		return nil // devices and fifos: not needed by the images run here
	}
	return os.Lchown(target, hdr.Uid, hdr.Gid)
}

// tarMode keeps setuid, setgid and sticky bits, which os.FileMode spells
// differently from tar.
func tarMode(hdr *tar.Header) os.FileMode {
	m := os.FileMode(hdr.Mode) & os.ModePerm
	if hdr.Mode&04000 != 0 {
		m |= os.ModeSetuid
	}
	if hdr.Mode&02000 != 0 {
		m |= os.ModeSetgid
	}
	if hdr.Mode&01000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// resolveIn returns the host path of the absolute container path p inside
// root, following symbolic links as the container would see them (an
// absolute link is relative to root), so nothing written or mounted through
// a link escapes root.
func resolveIn(root, p string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next // missing or not a link: taken as it is
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("too many symbolic links in %s", p)
		}
		link, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(link) {
			link = path.Join(cur, link)
		}
		parts = append(strings.Split(strings.TrimPrefix(path.Clean(link), "/"), "/"), parts...)
		cur = "/"
	}
	return filepath.Join(root, cur), nil
}

// linkTree makes dst a copy of the unpacked image at src whose regular
// files are hard links: directories, symbolic links, modes and owners are
// the image's, and a container deleting or replacing a file leaves the
// image as it was. (One writing into an image file in place changes it for
// later containers too: a documented limit.)
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := os.MkdirAll(target, fi.Mode().Perm()); err != nil {
				return err
			}
			if err := os.Chmod(target, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid|os.ModeSetuid)); err != nil {
				return err
			}
		case fi.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := os.Link(p, target); err != nil {
				return err
			}
			return nil // the link shares the owner
		default:
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		}
		return nil
	})
}
