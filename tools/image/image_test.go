package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var commitTime = time.Date(2026, 7, 1, 12, 30, 45, 0, time.UTC)

// testCABundle stands in for Debian's bundle: the builder only checks that it
// holds PEM certificates.
const testCABundle = "-----BEGIN CERTIFICATE-----\nMIIBstand-in\n-----END CERTIFICATE-----\n"

// testSpec builds an image of a stand-in binary and CA bundle; the image
// builder does not care what the bytes are.
func testSpec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	bin, bundle := filepath.Join(dir, "console"), filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(bin, []byte("\x7fELF stand-in console binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, []byte(testCABundle), 0o644); err != nil {
		t.Fatal(err)
	}
	return Spec{
		Binary: bin, Path: "/quota-console", CABundle: bundle, Title: "quota-console", Version: "v1.2.0-3-gabc1234",
		Revision: "abc1234abc1234abc1234abc1234abc1234abc12", Source: "https://example.com/quota-console",
		Created: commitTime, Arch: "amd64",
	}
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestImageConfigAndManifest(t *testing.T) {
	s := testSpec(t)
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.created":  "2026-07-01T12:30:45Z",
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.source":   s.Source,
		"org.opencontainers.image.title":    "quota-console",
		"org.opencontainers.image.version":  s.Version,
	}
	want := v1.Config{Entrypoint: []string{"/quota-console"}, User: "65532:65532", WorkingDir: "/", Labels: wantLabels}
	if diff := cmp.Diff(want, cfg.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Time.Equal(commitTime) {
		t.Errorf("os/arch/created = %s/%s/%s, want linux/amd64/%s", cfg.OS, cfg.Architecture, cfg.Created.Time, commitTime)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types: manifest %s, config %s; want OCI", m.MediaType, m.Config.MediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Fatalf("layers: %+v, want one %s", m.Layers, types.OCILayer)
	}
	if diff := cmp.Diff(wantLabels, m.Annotations); diff != "" {
		t.Errorf("manifest annotations (-want +got):\n%s", diff)
	}
}

// The layer holds the binary and the CA bundle (with its folders) and nothing
// else, with fixed owner, mode and time.
func TestLayerHoldsOnlyTheBinaryAndTheCABundle(t *testing.T) {
	s := testSpec(t)
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type entry struct {
		Name       string
		Mode       int64
		UID, GID   int
		Uname      string
		ModTime    time.Time
		PAXRecords map[string]string
		Content    string
	}
	var got []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, entry{h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime.UTC(), h.PAXRecords, string(content)})
	}
	bin, _ := os.ReadFile(s.Binary)
	want := []entry{
		{Name: "etc/", Mode: 0o755, ModTime: commitTime},
		{Name: "etc/ssl/", Mode: 0o755, ModTime: commitTime},
		{Name: "etc/ssl/certs/", Mode: 0o755, ModTime: commitTime},
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, ModTime: commitTime, Content: testCABundle},
		{Name: "quota-console", Mode: 0o755, ModTime: commitTime, Content: string(bin)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
}

// Everything that goes into the digest is an input: two builds of one spec
// are identical, and changing any input changes the digest.
func TestDigestDependsOnlyOnInputs(t *testing.T) {
	s := testSpec(t)
	first, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a wall-clock time leaking into the image would show
	second, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digestOf(t, first), digestOf(t, second); a != b {
		t.Fatalf("two builds of one spec: %s and %s", a, b)
	}

	otherBinary := testSpec(t)
	if err := os.WriteFile(otherBinary.Binary, []byte("another binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	otherBundle := testSpec(t)
	if err := os.WriteFile(otherBundle.CABundle, []byte(testCABundle+testCABundle), 0o644); err != nil {
		t.Fatal(err)
	}
	changes := map[string]Spec{"binary": otherBinary, "CA bundle": otherBundle}
	for field, change := range map[string]func(*Spec){
		"version":  func(s *Spec) { s.Version = "v1.3.0" },
		"revision": func(s *Spec) { s.Revision = "def567" },
		"created":  func(s *Spec) { s.Created = s.Created.Add(time.Second) },
		"arch":     func(s *Spec) { s.Arch = "arm64" },
	} {
		c := s
		change(&c)
		changes[field] = c
	}
	for field, c := range changes {
		img, err := Build(c)
		if err != nil {
			t.Fatal(err)
		}
		if digestOf(t, img) == digestOf(t, first) {
			t.Errorf("changing the %s did not change the digest", field)
		}
	}
}

func TestBuildRejectsIncompleteSpecs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"no version", func(s *Spec) { s.Version = "" }, "missing version"},
		{"no revision or source", func(s *Spec) { s.Revision, s.Source = "", "" }, "missing revision, source"},
		{"nested path", func(s *Spec) { s.Path = "/usr/bin/quota-console" }, "want a file in the root folder"},
		{"missing binary", func(s *Spec) { s.Binary = "/nonexistent/console" }, "no such file"},
		{"no CA bundle", func(s *Spec) { s.CABundle = "" }, "missing ca-bundle"},
		{"CA bundle without certificates", func(s *Spec) { s.CABundle = s.Binary }, "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			tc.change(&s)
			if _, err := Build(s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The CLI writes the layout, the archive and the digest; a second run in
// another folder gives byte-identical files.
func TestBuildCommandOutputsAreReproducible(t *testing.T) {
	s := testSpec(t)
	var digests []string
	var archives [][]byte
	for range 2 {
		out := t.TempDir()
		var stdout bytes.Buffer
		err := run(context.Background(), []string{"build", "-binary", s.Binary, "-ca-bundle", s.CABundle, "-out", out, "-version", s.Version,
			"-revision", s.Revision, "-source", s.Source, "-created", "1782909045", "-arch", "amd64"}, &stdout)
		if err != nil {
			t.Fatal(err)
		}
		digest := strings.TrimSpace(stdout.String())
		written, err := os.ReadFile(filepath.Join(out, "digest"))
		if err != nil || strings.TrimSpace(string(written)) != digest {
			t.Errorf("digest file %q (%v), printed %q", written, err, digest)
		}
		img, ref, err := ReadLayout(filepath.Join(out, "oci"))
		if err != nil {
			t.Fatal(err)
		}
		if got := digestOf(t, img); got != digest {
			t.Errorf("layout holds %s, printed %s", got, digest)
		}
		if ref != "quota-console:"+s.Version {
			t.Errorf("layout names the image %q", ref)
		}
		archive, err := os.ReadFile(filepath.Join(out, "quota-console.tar"))
		if err != nil {
			t.Fatal(err)
		}
		checkArchiveMatchesLayout(t, archive, filepath.Join(out, "oci"))
		digests, archives = append(digests, digest), append(archives, archive)
	}
	if digests[0] != digests[1] {
		t.Errorf("digests differ: %v", digests)
	}
	if sha(archives[0]) != sha(archives[1]) {
		t.Errorf("archives differ: %s and %s", sha(archives[0]), sha(archives[1]))
	}
}

// checkArchiveMatchesLayout: the archive holds exactly the layout's files, in
// name order, with fixed owner and time.
func checkArchiveMatchesLayout(t *testing.T, archive []byte, layoutDir string) {
	t.Helper()
	var want []string
	err := filepath.WalkDir(layoutDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == layoutDir {
			return err
		}
		rel, _ := filepath.Rel(layoutDir, p)
		if d.IsDir() {
			rel += "/"
		}
		want = append(want, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	var got []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(time.Unix(1782909045, 0)) {
			t.Errorf("%s: uid %d gid %d uname %q time %s", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		if h.Typeflag == tar.TypeReg {
			content, _ := io.ReadAll(tr)
			onDisk, err := os.ReadFile(filepath.Join(layoutDir, h.Name))
			if err != nil || !bytes.Equal(content, onDisk) {
				t.Errorf("%s differs from the layout's file (%v)", h.Name, err)
			}
		}
		got = append(got, h.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive entries (-layout +archive):\n%s", diff)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Push to a registry served in the test process, then pull: the registry
// holds the same image under the version tag.
func TestPushToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec(t)
	out := t.TempDir()
	if err := run(context.Background(), []string{"build", "-binary", s.Binary, "-out", out, "-version", s.Version,
		"-revision", s.Revision, "-source", s.Source, "-created", "1782909045"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	repo := u.Host + "/team/quota-console"
	if err := run(context.Background(), []string{"push", "-layout", filepath.Join(out, "oci"), "-to", repo}, &stdout); err != nil {
		t.Fatal(err)
	}
	built, _, err := ReadLayout(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	want := repo + ":" + s.Version + "@" + digestOf(t, built)
	if got := strings.TrimSpace(stdout.String()); got != want {
		t.Errorf("push printed %q, want %q", got, want)
	}
	tag, err := name.NewTag(repo + ":" + s.Version)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	if digestOf(t, pulled) != digestOf(t, built) {
		t.Errorf("pulled %s, pushed %s", digestOf(t, pulled), digestOf(t, built))
	}
	cfg, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != User {
		t.Errorf("pulled image runs as %q", cfg.Config.User)
	}
}

func TestCommandErrors(t *testing.T) {
	bin := testSpec(t).Binary
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "usage: image build|push"},
		{"unknown command", []string{"load"}, `unknown command "load"`},
		{"created not a number", []string{"build", "-binary", bin, "-version", "v1", "-revision", "r", "-source", "s", "-created", "yesterday"}, "want Unix seconds"},
		{"push without -to", []string{"push"}, "-to is required"},
		{"push without a built image", []string{"push", "-layout", filepath.Join(t.TempDir(), "none"), "-to", "127.0.0.1:1/x"}, "run make image first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, flag.ErrHelp) {
				t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

func TestHasTagOrDigest(t *testing.T) {
	for ref, want := range map[string]bool{
		"registry.example.com/quota-console":               false,
		"registry.example.com:5000/team/quota-console":     false,
		"registry.example.com:5000/team/quota-console:v1":  true,
		"quota-console:v1":                                 true,
		"registry.example.com/quota-console@sha256:abcdef": true,
	} {
		if got := hasTagOrDigest(ref); got != want {
			t.Errorf("hasTagOrDigest(%q) = %v, want %v", ref, got, want)
		}
	}
}
