// Package imagetest tests the console's container image as `make image`
// builds it: what is in it, the binary and the CA bundle (read with the
// standard library alone, not with the builder's own library), that the
// binary in it runs, that one commit gives one digest, and that podman runs
// it against the test sandbox.
package imagetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/sandbox"
)

// image is one `make image` output folder, read back.
type image struct {
	dir      string
	digest   string // sha256:<hex> of the manifest
	manifest manifest
	config   config
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type manifest struct {
	MediaType   string            `json:"mediaType"`
	Config      descriptor        `json:"config"`
	Layers      []descriptor      `json:"layers"`
	Annotations map[string]string `json:"annotations"`
}

type config struct {
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Created      time.Time `json:"created"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		User       string            `json:"User"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// git facts of the tree under test, as the Makefile reads them.
type commit struct {
	version, revision string
	time              time.Time
	clean             bool
}

var (
	once     sync.Once
	built    *image
	buildErr error
	head     commit
)

// builtImage runs `make image` once for the package's tests.
func builtImage(t *testing.T) (*image, commit) {
	t.Helper()
	once.Do(func() {
		var root string
		if root, buildErr = sandbox.RepoRoot(); buildErr != nil {
			return
		}
		if head, buildErr = readCommit(root); buildErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "quota-console-image-")
		if err != nil {
			buildErr = err
			return
		}
		built, buildErr = makeImage(root, dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built, head
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built != nil {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func readCommit(root string) (commit, error) {
	var c commit
	var err error
	if c.version, err = git(root, "describe", "--tags", "--always", "--dirty"); err != nil {
		return c, err
	}
	if c.revision, err = git(root, "rev-parse", "HEAD"); err != nil {
		return c, err
	}
	secs, err := git(root, "log", "-1", "--format=%ct")
	if err != nil {
		return c, err
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	c.time = time.Unix(n, 0).UTC()
	status, statusErr := git(root, "status", "--porcelain")
	c.clean = status == "" && statusErr == nil
	return c, err
}

// makeImage runs `make image` in the clone root, writing to dir.
func makeImage(root, dir string) (*image, error) {
	cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE_DIR="+dir)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("make image: %v\n%s%s", err, out, stderr.String())
	}
	img := &image{dir: dir}
	// The last line make prints is the digest; the file says the same.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	img.digest = lines[len(lines)-1]
	if written, err := os.ReadFile(filepath.Join(dir, "digest")); err != nil || strings.TrimSpace(string(written)) != img.digest {
		return nil, fmt.Errorf("make image printed %q, digest file has %q (%v)", img.digest, written, err)
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := readJSON(filepath.Join(dir, "oci", "index.json"), &index); err != nil {
		return nil, err
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Digest != img.digest {
		return nil, fmt.Errorf("index.json lists %+v, want the one image %s", index.Manifests, img.digest)
	}
	if err := readBlob(dir, index.Manifests[0], &img.manifest); err != nil {
		return nil, err
	}
	if err := readBlob(dir, img.manifest.Config, &img.config); err != nil {
		return nil, err
	}
	return img, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// blob reads a blob of the layout and checks it against its descriptor.
func (img *image) blob(d descriptor) ([]byte, error) {
	return blob(img.dir, d)
}

func blob(dir string, d descriptor) ([]byte, error) {
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("digest %q is not sha256", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(dir, "oci", "blobs", "sha256", hexDigest))
	if err != nil {
		return nil, err
	}
	if got := sha256Hex(data); got != hexDigest || int64(len(data)) != d.Size {
		return nil, fmt.Errorf("blob %s: content hashes to %s, %d bytes (descriptor: %d)", d.Digest, got, len(data), d.Size)
	}
	return data, nil
}

func readBlob(dir string, d descriptor, v any) error {
	data, err := blob(dir, d)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// file is the content of a regular file of the image's layer; nil when
// there is none of that name.
func (img *image) file(t *testing.T, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(img.layer(t)))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Name == name && h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

type file struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
}

// layer is the only layer, uncompressed, checked against its diff id.
func (img *image) layer(t *testing.T) []byte {
	t.Helper()
	if len(img.manifest.Layers) != 1 || len(img.config.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff ids: want one", len(img.manifest.Layers), len(img.config.RootFS.DiffIDs))
	}
	compressed, err := img.blob(img.manifest.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := "sha256:" + sha256Hex(layer); got != img.config.RootFS.DiffIDs[0] {
		t.Errorf("layer diff id %s, config says %s", got, img.config.RootFS.DiffIDs[0])
	}
	return layer
}

// layerFiles lists the only layer's entries and returns the binary's bytes.
func (img *image) layerFiles(t *testing.T) ([]file, []byte) {
	t.Helper()
	layer := img.layer(t)
	var files []file
	var binary []byte
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.UTC()})
		if h.Name == "quota-console" {
			if binary, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return files, binary
}

func TestImageConfig(t *testing.T) {
	img, c := builtImage(t)
	if img.manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		img.manifest.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("not an OCI image: manifest %s, config %s", img.manifest.MediaType, img.manifest.Config.MediaType)
	}
	cfg := img.config.Config
	if diff := cmp.Diff([]string{"/quota-console"}, cfg.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cfg.User != "65532:65532" || cfg.WorkingDir != "/" || len(cfg.Cmd) != 0 || len(cfg.Env) != 0 {
		t.Errorf("user %q, working dir %q, cmd %q, env %q; want 65532:65532, /, none, none", cfg.User, cfg.WorkingDir, cfg.Cmd, cfg.Env)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.created":  c.time.Format(time.RFC3339),
		"org.opencontainers.image.revision": c.revision,
		"org.opencontainers.image.source":   "https://github.com/openquota/console",
		"org.opencontainers.image.title":    "quota-console",
		"org.opencontainers.image.version":  c.version,
	}
	if diff := cmp.Diff(wantLabels, cfg.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLabels, img.manifest.Annotations); diff != "" {
		t.Errorf("manifest annotations (-want +got):\n%s", diff)
	}
	if img.config.OS != "linux" || img.config.Architecture != runtime.GOARCH || !img.config.Created.Equal(c.time) {
		t.Errorf("os %s, arch %s, created %s; want linux, %s, the commit time %s",
			img.config.OS, img.config.Architecture, img.config.Created, runtime.GOARCH, c.time)
	}
}

// The image holds the binary and the CA bundle and nothing else: no shell, no
// busybox, owned by root and read-only for the user it runs as.
func TestImageHoldsOnlyTheBinaryAndTheCABundle(t *testing.T) {
	img, c := builtImage(t)
	files, binary := img.layerFiles(t)
	want := []file{
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755, ModTime: c.time},
		{Name: "etc/ssl/", Type: tar.TypeDir, Mode: 0o755, ModTime: c.time},
		{Name: "etc/ssl/certs/", Type: tar.TypeDir, Mode: 0o755, ModTime: c.time},
		{Name: "etc/ssl/certs/ca-certificates.crt", Type: tar.TypeReg, Mode: 0o644, ModTime: c.time},
		{Name: "quota-console", Type: tar.TypeReg, Mode: 0o755, ModTime: c.time},
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files in the image (-want +got):\n%s", diff)
	}
	for _, f := range files {
		if base := filepath.Base(f.Name); base == "sh" || base == "bash" || base == "busybox" || base == "ash" {
			t.Errorf("the image has a shell: %s", f.Name)
		}
	}
	// Static: an interpreter (the dynamic loader) would need a libc the image lacks.
	exe, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked (has PT_INTERP)")
		}
	}
	if exe.Section(".debug_info") != nil || exe.Section(".symtab") != nil {
		t.Error("the binary has debug information or a symbol table (want -s -w)")
	}
}

// The image trusts the public certificate authorities: the console verifies
// the TLS certificates of PostgreSQL (sslmode=verify-full), Prometheus and
// an apiserver outside the cluster with the bundle Go reads first,
// /etc/ssl/certs/ca-certificates.crt, the build machine's Debian bundle.
func TestImageTrustsPublicCertificateAuthorities(t *testing.T) {
	img, _ := builtImage(t)
	bundle := img.file(t, "etc/ssl/certs/ca-certificates.crt")
	if bundle == nil {
		t.Fatal("the image has no /etc/ssl/certs/ca-certificates.crt")
	}
	want, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bundle, want) {
		t.Errorf("the image's CA bundle (%d bytes) is not the build machine's (%d bytes)", len(bundle), len(want))
	}
	n := 0
	for rest := bundle; ; n++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("certificate %d of the bundle: %v", n+1, err)
		}
	}
	if n < 50 {
		t.Errorf("the bundle holds %d certificates, want the public authorities (over 100 in Debian's)", n)
	}
}

// The binary taken out of the image reports the version and revision it was
// stamped with.
func TestImageBinaryReportsItsVersion(t *testing.T) {
	img, c := builtImage(t)
	_, binary := img.layerFiles(t)
	path := filepath.Join(t.TempDir(), "quota-console")
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("quota-console --version: %v\n%s", err, out)
	}
	want := fmt.Sprintf("quota-console %s (revision %s, %s)\n", c.version, c.revision, runtime.Version())
	if string(out) != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}

// Two builds of one commit give one digest and byte-identical archives. When
// the tree is committed, the second build is in a fresh clone at another path,
// built at another time, which proves no build path or clock reading leaks
// into the image.
func TestImageDigestIsStable(t *testing.T) {
	img, c := builtImage(t)
	root, err := sandbox.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	where := root
	if c.clean {
		where = filepath.Join(t.TempDir(), "elsewhere", "clone")
		for _, args := range [][]string{
			{"clone", "--quiet", "--shared", "--no-checkout", root, where},
			{"-C", where, "checkout", "--quiet", c.revision},
		} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	} else {
		t.Logf("uncommitted changes: building twice in %s (a clean tree builds the second time in a fresh clone)", root)
	}
	again, err := makeImage(where, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if again.digest != img.digest {
		t.Fatalf("two builds of %s: digests %s and %s", c.revision, img.digest, again.digest)
	}
	first, err := os.ReadFile(filepath.Join(img.dir, "quota-console.tar"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join(again.dir, "quota-console.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("archives differ: sha256 %s and %s", sha256Hex(first), sha256Hex(second))
	}
	t.Logf("image %s, %d bytes compressed (archive), built twice", img.digest, len(first))
}
