// Command image builds the console's OCI image without a container engine,
// and pushes it. `make image` and `make image-push` run it:
//
//	image build -binary bin/image/quota-console -ca-bundle /etc/ssl/certs/ca-certificates.crt -out bin/image -version v1.2.0 -revision <sha> -created <unix> -source <url>
//	image push -layout bin/image/oci -to registry.example.com/quota-console
//
// build writes an OCI layout (<out>/oci), an OCI archive of it for
// `podman load` (<out>/quota-console.tar) and the manifest digest
// (<out>/digest), and prints the digest. One commit always gives one digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

const usage = "usage: image build|push [flags] (image build -h, image push -h)"

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "build":
		return build(args[1:], stdout)
	case "push":
		return push(ctx, args[1:], stdout)
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}

func build(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	var s Spec
	out := fs.String("out", "bin/image", "output folder: oci/ (OCI layout), quota-console.tar (OCI archive), digest")
	created := fs.String("created", "", "image creation time, Unix seconds (the commit time, so that rebuilds are identical)")
	fs.StringVar(&s.Binary, "binary", "", "the static console binary")
	fs.StringVar(&s.Path, "path", "/quota-console", "the binary's path in the image (the entrypoint)")
	fs.StringVar(&s.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of the certificate authorities to trust (Debian's ca-certificates), copied to "+CABundlePath)
	fs.StringVar(&s.Title, "title", "quota-console", "image title and name")
	fs.StringVar(&s.Version, "version", "", "version (git describe)")
	fs.StringVar(&s.Revision, "revision", "", "revision (commit hash)")
	fs.StringVar(&s.Source, "source", "", "source repository URL")
	fs.StringVar(&s.Arch, "arch", runtime.GOARCH, "architecture of the binary (GOARCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil || secs < 0 {
		return fmt.Errorf("-created %q: want Unix seconds, such as the output of git log -1 --format=%%ct", *created)
	}
	s.Created = time.Unix(secs, 0).UTC()
	img, err := Build(s)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	tag, err := name.NewTag(s.Title + ":" + tagOf(s.Version))
	if err != nil {
		return fmt.Errorf("image name: %w", err)
	}
	layoutDir := filepath.Join(*out, "oci")
	if err := WriteLayout(layoutDir, img, tag.String()); err != nil {
		return err
	}
	if err := WriteArchive(layoutDir, filepath.Join(*out, s.Title+".tar"), s.Created); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, digest)
	return err
}

// tagOf turns a version into a valid tag (git describe output such as
// v1.2.0-3-gabc123-dirty already is one; '+' is not allowed in tags).
func tagOf(version string) string {
	return strings.ReplaceAll(version, "+", "-")
}

func push(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	layoutDir := fs.String("layout", "bin/image/oci", "the OCI layout image build wrote")
	to := fs.String("to", "", "repository to push to, such as registry.example.com/team/quota-console; without a tag, the image's version is the tag")
	insecure := fs.Bool("insecure", false, "use plain HTTP (always used for localhost registries)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("-to is required, such as -to registry.example.com/team/quota-console")
	}
	img, ref, err := ReadLayout(*layoutDir)
	if err != nil {
		return fmt.Errorf("%w (run make image first)", err)
	}
	target := *to
	if t, err := name.NewTag(ref); err == nil && !hasTagOrDigest(target) {
		target += ":" + t.TagStr()
	}
	digest, err := Push(ctx, img, target, *insecure)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s@%s\n", target, digest)
	return err
}

// hasTagOrDigest tells whether a reference names a tag or digest: a ':' after
// the last '/' (a registry's port comes before it), or an '@'.
func hasTagOrDigest(ref string) bool {
	last := ref[strings.LastIndex(ref, "/")+1:]
	return strings.Contains(last, ":") || strings.Contains(ref, "@")
}
