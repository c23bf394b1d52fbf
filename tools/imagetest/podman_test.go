package imagetest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/openquota/console/sandbox/sandboxtest"
)

// runc: podman's default runtime (crun) fails on these machines on rlimits
// and on the cgroup layout; so do podman's default ulimits and systemd cgroups.
const (
	runc           = "/usr/sbin/runc"
	containersConf = "[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = \"cgroupfs\"\n"
)

// podman runs podman with the settings that work here.
func podman(t *testing.T, conf string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("podman", append([]string{"--runtime", runc}, args...)...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// The image loads into podman and, run as its non-root user with the test
// sandbox's kubeconfig mounted read-only, serves /healthz, /readyz and its
// build info. `make test-image-deps` installs podman and runc.
func TestImageRunsInPodman(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (make test-image-deps installs it with runc)")
	}
	if _, err := os.Stat(runc); err != nil {
		t.Skipf("%s is not installed (make test-image-deps installs it)", runc)
	}
	img, c := builtImage(t)
	env := sandboxtest.Env(t)

	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		t.Fatal(err)
	}
	// The container's user is not the kubeconfig's owner: give it a readable copy.
	kubeconfig, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigCopy := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigCopy, kubeconfig, 0o644); err != nil {
		t.Fatal(err)
	}

	loaded, err := podman(t, conf, "load", "--quiet", "--input", filepath.Join(img.dir, "quota-console.tar"))
	if err != nil {
		t.Fatal(err)
	}
	_, ref, _ := strings.Cut(loaded, ": ") // "Loaded image: localhost/quota-console:<version>"
	if want := "localhost/quota-console:" + c.version; ref != want {
		t.Errorf("podman load: %q, want the image named %s", loaded, want)
		ref = want
	}
	digest, err := podman(t, conf, "image", "inspect", "--format", "{{.Digest}}", ref)
	if err != nil {
		t.Fatal(err)
	}
	if digest != img.digest {
		t.Errorf("podman has the image as %s, built %s", digest, img.digest)
	}

	addr := freeLoopbackAddr(t)
	name := fmt.Sprintf("quota-console-imagetest-%d", os.Getpid())
	id, err := podman(t, conf, "run", "--detach", "--name", name, "--network", "host",
		"--volume", kubeconfigCopy+":/etc/quota-console/kubeconfig:ro",
		ref, "--kubeconfig", "/etc/quota-console/kubeconfig", "--listen", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podman(t, conf, "logs", id)
			t.Logf("container logs:\n%s", logs)
		}
		if _, err := podman(t, conf, "rm", "--force", "--time", "2", id); err != nil {
			t.Error(err)
		}
		if _, err := podman(t, conf, "rmi", ref); err != nil {
			t.Log(err) // another test run may hold the same image
		}
	})

	base := "http://" + addr
	waitFor200(t, base+"/healthz", 30*time.Second)
	waitFor200(t, base+"/readyz", 60*time.Second)
	metrics := get(t, base+"/metrics")
	want := fmt.Sprintf(`quota_console_build_info{goversion="%s",revision="%s",version="%s"} 1`, runtime.Version(), c.revision, c.version)
	if !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	user, err := podman(t, conf, "inspect", "--format", "{{.Config.User}}", id)
	if err != nil || user != "65532:65532" {
		t.Errorf("container user %q (%v), want 65532:65532", user, err)
	}
	if _, err := podman(t, conf, "exec", id, "/bin/sh", "-c", "true"); err == nil {
		t.Error("a shell ran in the container")
	}
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor200(t *testing.T, url string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within %s: %s", url, limit, last)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}
