package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// User is the numeric non-root user and group the console runs as; the
	// chart's securityContext uses the same numbers.
	User = "65532:65532"
	// refNameAnnotation names the image inside an OCI layout; podman load
	// takes it as the loaded image's name.
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

// Spec is what goes into the console's image. Everything that could differ
// between two builds of one commit is fixed here, so the digest depends only
// on these fields and the bytes of the binary and the CA bundle.
type Spec struct {
	Binary string // the static console binary
	Path   string // its path in the image, e.g. /quota-console
	// CABundle is the PEM bundle of the certificate authorities the console
	// trusts (Debian's ca-certificates: /etc/ssl/certs/ca-certificates.crt),
	// copied to CABundlePath.
	CABundle string
	Title    string    // org.opencontainers.image.title
	Version  string    // git describe
	Revision string    // commit hash
	Source   string    // the repository's URL
	Created  time.Time // commit time: used for the config, history and file times
	Arch     string    // GOARCH of the binary
}

func (s Spec) check() error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"binary", s.Binary}, {"path", s.Path}, {"ca-bundle", s.CABundle}, {"title", s.Title}, {"version", s.Version},
		{"revision", s.Revision}, {"source", s.Source}, {"arch", s.Arch},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if !strings.HasPrefix(s.Path, "/") || strings.Count(s.Path, "/") != 1 {
		return fmt.Errorf("path %q: want a file in the root folder, such as /quota-console", s.Path)
	}
	return nil
}

// Labels are the OCI labels of the image config (and the manifest's annotations).
func (s Spec) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.source":   s.Source,
		"org.opencontainers.image.title":    s.Title,
		"org.opencontainers.image.version":  s.Version,
	}
}

// CABundlePath is where the image keeps the CA bundle: the first file Go's
// crypto/x509 reads on Linux (and OpenSSL's default), so TLS to PostgreSQL
// (sslmode=verify-full), Prometheus or an apiserver verifies with it.
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// Build makes the image: one layer holding only the binary and the CA
// bundle, on an empty base (no shell, no libc, no package manager).
func Build(s Spec) (v1.Image, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	bundle, err := os.ReadFile(s.CABundle)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(bundle, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("ca-bundle %s holds no PEM certificate", s.CABundle)
	}
	created := s.Created.UTC().Truncate(time.Second)
	layerTar, err := layerOf(created,
		layerFile{name: strings.TrimPrefix(CABundlePath, "/"), data: bundle, mode: 0o644},
		layerFile{name: strings.TrimPrefix(s.Path, "/"), data: bin, mode: 0o755})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "make image", Comment: s.Title + " " + s.Version},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = s.Arch, "linux"
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		Entrypoint: []string{s.Path},
		User:       User,
		WorkingDir: "/",
		Labels:     s.Labels(),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, s.Labels()).(v1.Image), nil
}

// layerFile is a root-owned file of the layer.
type layerFile struct {
	name string // without the leading /
	data []byte
	mode int64
}

// layerOf is a layer with the given files, in name order, each preceded by
// its folders: root-owned, fixed modes and time, and no extended headers
// that would carry the build machine's details.
func layerOf(mtime time.Time, files ...layerFile) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	folders := map[string]bool{}
	for _, f := range files {
		parts := strings.Split(f.name, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/") + "/"
			if folders[dir] {
				continue
			}
			folders[dir] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: f.name, Size: int64(len(f.data)), Mode: f.mode,
			ModTime: mtime, Format: tar.FormatUSTAR,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as the only image of a fresh OCI layout in dir,
// named ref (e.g. quota-console:v1.2.0) for tools that load it.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: ref}))
}

// ReadLayout returns the image WriteLayout wrote into dir, and its name.
func ReadLayout(dir string) (v1.Image, string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(m.Manifests) != 1 {
		return nil, "", fmt.Errorf("%s holds %d images, want 1", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	return img, m.Manifests[0].Annotations[refNameAnnotation], err
}

// WriteArchive packs an OCI layout folder into an OCI archive (what
// `podman load` reads): entries in name order, with fixed owner, modes and
// time, so the same layout always gives the same bytes.
func WriteArchive(layoutDir, archive string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(layoutDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == layoutDir {
			return err
		}
		rel, err := filepath.Rel(layoutDir, path)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp := archive + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, n := range names {
		info, err := os.Stat(filepath.Join(layoutDir, n))
		if err != nil {
			return errors.Join(err, f.Close())
		}
		h := &tar.Header{Name: n, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Mode: 0o644, Size: info.Size()}
		if info.IsDir() {
			h.Name, h.Typeflag, h.Mode, h.Size = n+"/", tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return errors.Join(err, f.Close())
		}
		if !info.IsDir() {
			if err := copyFile(tw, filepath.Join(layoutDir, n)); err != nil {
				return errors.Join(err, f.Close())
			}
		}
	}
	if err := errors.Join(tw.Close(), f.Close()); err != nil {
		return err
	}
	return os.Rename(tmp, archive)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// Push writes img to the registry reference to (e.g. registry.example.com/team/quota-console:v1),
// with the credentials of the local Docker/podman config, and returns the
// pushed manifest's digest. Plain HTTP is used for localhost registries, or
// for any registry with insecure.
func Push(ctx context.Context, img v1.Image, to string, insecure bool) (v1.Hash, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(to, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", to, err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing to %s: %w", ref, err)
	}
	return img.Digest()
}
