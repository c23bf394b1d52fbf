package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	consolekueue "github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

var (
	consoleOnce sync.Once
	consoleDir  string
	consolePath string
	consoleErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if consoleDir != "" {
		os.RemoveAll(consoleDir)
	}
	os.Exit(code)
}

// consoleBinary is ./cmd/console built once per test binary, so the tests
// check the code under test.
func consoleBinary(t *testing.T) string {
	t.Helper()
	consoleOnce.Do(func() {
		root, err := sandbox.RepoRoot()
		if err != nil {
			consoleErr = err
			return
		}
		if consoleDir, consoleErr = os.MkdirTemp("", "quota-console-chart-test-"); consoleErr != nil {
			return
		}
		consolePath = filepath.Join(consoleDir, "console")
		cmd := exec.Command("go", "build", "-o", consolePath, "./cmd/console")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			consoleErr = fmt.Errorf("go build ./cmd/console: %v\n%s", err, out)
		}
	})
	if consoleErr != nil {
		t.Fatal(consoleErr)
	}
	return consolePath
}

// comingFlags are flags the chart passes only when their value is set,
// because the console does not have them yet. Take a flag off the list when
// the console gets it.
var comingFlags []string

// consoleFlags are the flags `console --help` lists.
func consoleFlags(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command(consoleBinary(t), "--help")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // --help exits with status 0 or 2 depending on the flag package's mode
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
		flags["--"+m[1]] = true
	}
	if len(flags) < 10 {
		t.Fatalf("console --help lists %d flags:\n%s", len(flags), out.String())
	}
	return flags
}

// Every flag the chart passes, with every optional part on, is one the
// console has, or one of comingFlags (which the defaults never pass).
func TestChartPassesOnlyFlagsTheConsoleHas(t *testing.T) {
	have := consoleFlags(t)
	for _, f := range comingFlags {
		if have[f] {
			t.Errorf("the console has %s now: take it off comingFlags (and pass it by default if it should be)", f)
		}
	}
	coming := map[string]bool{}
	for _, f := range comingFlags {
		coming[f] = true
	}
	used := map[string]bool{}
	for _, tc := range []struct {
		name string
		args []string
	}{
		// extraArgs are the user's own, passed as given.
		{"everything on, proxy sign-in, SQLite history", []string{"--values", everythingOn, "--set-json", "extraArgs=[]"}},
		{"everything on, token sign-in, PostgreSQL history", []string{"--values", everythingOn, "--set-json", "extraArgs=[]",
			"--set", "auth.mode=token", "--set", "auth.proxy.secret.existingSecret=", "--set", "auth.token.audience=quota-console",
			"--set", "history.store=postgres", "--set", "history.postgres.existingSecret=history-db"}},
		{"defaults", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := typed[appsv1.Deployment](t, render(t, "qc", tc.args...), "Deployment")
			for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
				flag, _, _ := strings.Cut(arg, "=")
				used[flag] = true
				switch {
				case have[flag]:
				case coming[flag] && tc.args == nil:
					t.Errorf("the defaults pass %s, which the console does not have yet", flag)
				case coming[flag]:
				default:
					t.Errorf("the chart passes %s, which console --help does not list", flag)
				}
			}
		})
	}
	// The renders above reach every flag of the chart, so none goes unchecked.
	var missed []string
	for f := range have {
		if !used[f] {
			missed = append(missed, f)
		}
	}
	sort.Strings(missed)
	// Flags the chart leaves to the console: where the config comes from
	// (in-cluster), profiles for measuring on a workstation, and --help's own.
	if diff := cmp.Diff([]string{"--kubeconfig", "--profile-listen", "--version"}, missed); diff != "" {
		t.Errorf("flags of the console the chart never passes (-want +got):\n%s", diff)
	}
}

// The chart's RBAC is enough for the console and no more, against the
// sandbox's apiserver: the chart installed as a second release (the shared
// roles come from deploy/rbac, rendered from the same templates), the
// console run with its ServiceAccount's token and the release's arguments
// behind a proxy on loopback. A viewer sees every page; an admin creates a
// team through it; the same create as a viewer is refused by the apiserver.
func TestChartRBACServesTheConsole(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	env := sandboxtest.Env(t)
	if err := rbac.Apply(ctx, c.cfg, "quota-console-tests"); err != nil {
		t.Fatalf("the shared roles (deploy/rbac): %v", err)
	}
	id := rand.String(5)
	ns := c.namespace(t, "qc-rbac")
	release := "rbac-" + id
	// admin-scope lets quota-console-admin (and the console) touch hyperpod-ns-
	// namespaces and the cohorts named after shared-pool only.
	s := domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: domain.DefaultSettings.Cohort + "-rbac-" + id, StateNamespace: ns}
	addr := freeLoopbackAddr(t)
	common := []string{"--kubeconfig", c.kubeconfig, "--namespace", ns, "--timeout", "2m"}
	install := append([]string{"install", release, chartDir, "--set", "rbac.sharedRoles=false", "--set", "replicas=1",
		"--set", "listen=" + addr, "--set", "auth.mode=proxy", "--set", "auth.proxy.cidrs={127.0.0.1/32}",
		"--set", "namespacePrefix=" + s.NamespacePrefix, "--set", "cohort=" + s.Cohort, "--set", "prometheus.url=" + env.PrometheusURL,
	}, common...)
	if out, err := runHelm(t, install...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = runHelm(t, append([]string{"uninstall", release, "--ignore-not-found"}, common...)...) })

	name := release + "-quota-console"
	d, err := c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	args := localArgs(t, c, d)
	saKubeconfig := serviceAccountKubeconfig(t, c, ns, sa)
	args = append(args, "--kubeconfig", saKubeconfig)
	logs := startConsole(t, consoleBinary(t), args, "http://"+addr)

	// The metrics port serves the figures of the cluster, read from what
	// the ServiceAccount may list.
	for _, a := range args {
		if metrics, ok := strings.CutPrefix(a, "--metrics-listen="); ok {
			res, err := http.Get("http://" + metrics + "/metrics")
			if err != nil {
				t.Fatalf("the metrics port: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "quota_console_read_model_snapshot_timestamp_seconds ") ||
				!strings.Contains(string(body), "quota_console_instance_type_nodes{") {
				t.Errorf("the metrics port answered %d without the figures of the cluster:\n%.1000s", res.StatusCode, body)
			}
		}
	}

	// Sign-outs (token mode, which this console is not in) with the
	// ServiceAccount: the list is watched by name and written.
	saCfg, err := clientcmd.BuildConfigFromFlags("", saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	saKube := kubernetes.NewForConfigOrDie(saCfg)
	signedOut := consolekueue.NewSignOuts(saKube, ns, 10, auth.SignOutExpiry(time.Hour))
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	signedOut.Start(watchCtx)
	if err := signedOut.SignOut(ctx, "account-"+id, time.Now()); err != nil {
		t.Errorf("recording a sign-out as the console: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return signedOut.Synced(), nil
	}); err != nil {
		t.Error("the console's ServiceAccount cannot read the sign-out list")
	}
	// An informer falls back to listing when it may not watch: ask for the
	// watch itself, of that one ConfigMap and of all.
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + consolekueue.SignOutsConfigMap}
	if w, err := saKube.CoreV1().ConfigMaps(ns).Watch(ctx, byName); err != nil {
		t.Errorf("watching the sign-out list as the console: %v", err)
	} else {
		w.Stop()
	}
	// The teams' revision histories, by label: members and allocations come
	// from them (RBAC cannot narrow a list to a label: the state namespace's
	// ConfigMaps are the console's own).
	histories := metav1.ListOptions{LabelSelector: domain.RevisionsLabel + "=team"}
	if w, err := saKube.CoreV1().ConfigMaps(ns).Watch(ctx, histories); err != nil {
		t.Errorf("watching the teams' revision histories as the console: %v", err)
	} else {
		w.Stop()
	}
	if _, err := saKube.CoreV1().ConfigMaps("default").Watch(ctx, histories); !apierrors.IsForbidden(err) {
		t.Errorf("watching ConfigMaps of another namespace as the console: %v, want forbidden", err)
	}

	// What the console will need once it elects a leader, asked of the
	// apiserver for the chart's ServiceAccount.
	saUser := "system:serviceaccount:" + ns + ":" + sa
	for _, want := range []struct {
		verb, group, resource, ns, name string
		allowed                         bool
	}{
		{"create", "coordination.k8s.io", "leases", ns, "", true},
		{"update", "coordination.k8s.io", "leases", ns, name + "-leader", true},
		{"update", "coordination.k8s.io", "leases", ns, "another", false},
		// Events only about cluster-scoped objects, which Kubernetes keeps in default.
		{"create", "", "events", "default", "", true},
		{"create", "", "events", ns, "", false},
		{"delete", "", "configmaps", ns, "x", true},
		{"list", "", "configmaps", ns, "", true},
		{"list", "", "configmaps", "default", "", false},
		{"create", "", "configmaps", "default", "", false},
		// The changes it makes for users (within the admission policy), never
		// as anyone else.
		{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", true},
		{"get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "", "x", true},
		{"impersonate", "", "users", "", "alice", false},
		{"impersonate", "", "groups", "", "system:masters", false},
	} {
		resource, subresource, _ := strings.Cut(want.resource, "/")
		sar, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: saUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: want.verb, Group: want.group, Resource: resource, Subresource: subresource, Namespace: want.ns, Name: want.name},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != want.allowed {
			t.Errorf("the console may %s %s %s/%s: %v, want %v", want.verb, want.resource, want.ns, want.name, sar.Status.Allowed, want.allowed)
		}
	}

	viewer, admin := "viewer-"+id, "admin-"+id
	testenv.BindUser(t, c.kube, viewer, rbac.ViewerRole)
	testenv.BindUser(t, c.kube, admin, rbac.AdminRole)
	kq := kueueclient.NewForConfigOrDie(c.cfg)
	applier := consolekueue.Applier{Kube: c.kube, Kueue: kq}
	for _, team := range []string{"made", "refused"} {
		t.Cleanup(func() { _ = applier.DeleteTeam(context.Background(), s, team) })
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(user, method, path string, form url.Values) (int, string, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, "http://"+addr+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-User", user)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin") // as the console's own page
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}

	for _, page := range []string{"/", "/usage", "/tasks", "/teams", "/policy", "/reports/usage", "/teams/new"} {
		if code, _, body := do(viewer, http.MethodGet, page, nil); code != http.StatusOK {
			t.Errorf("GET %s as a viewer: %d\n%.500s", page, code, body)
		}
	}

	code, location, body := do(admin, http.MethodPost, "/teams", teamForm("made"))
	if code != http.StatusSeeOther || location != "/teams?saved=made" {
		t.Fatalf("POST /teams as an admin: %d %q\n%.2000s", code, location, body)
	}
	if _, err := kq.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("made"), metav1.GetOptions{}); err != nil {
		t.Errorf("the admin's team: %v", err)
	}
	// The console's own records of the change, written with its identity.
	if _, err := c.kube.CoreV1().ConfigMaps(ns).Get(ctx, domain.TeamRevisionsName(s, "made"), metav1.GetOptions{}); err != nil {
		t.Errorf("the team's revision history: %v", err)
	}
	events, err := c.kube.CoreV1().Events(domain.EventNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + s.ClusterQueue("made")})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no Event about the team's ClusterQueue in %s (%v)", domain.EventNamespace, err)
	}

	code, _, body = do(viewer, http.MethodPost, "/teams", teamForm("refused"))
	if code != http.StatusForbidden || !strings.Contains(body, "You may not change team refused") {
		t.Errorf("POST /teams as a viewer: %d, want 403 saying the viewer may not\n%.2000s", code, body)
	}
	if _, err := kq.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("refused"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the viewer's team ClusterQueue: %v, want not found", err)
	}
	if _, err := c.kube.CoreV1().Namespaces().Get(ctx, s.Namespace("refused"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the viewer's team namespace: %v, want not found", err)
	}

	// Nothing the console did as itself was refused.
	if denied := regexp.MustCompile(`(?i)"`+regexp.QuoteMeta(saUser)+`" cannot [^"\n]*`).FindAllString(logs.String(), -1); len(denied) > 0 {
		t.Errorf("the apiserver refused the console's own requests: %q", denied)
	}
}

func teamForm(name string) url.Values {
	return url.Values{"name": {name}, "enabled": {"true"}, "fairShareWeight": {"10"}, "preemption": {"LowerPriority"},
		"lending": {"LendAndBorrow"}, "borrowLimit": {"50"}, "users": {"alice"}, "groups": {"ml"},
		"quota.0.instanceType": {"ml.p5.48xlarge"}, "quota.0.gpus": {"2"}}
}

// localArgs are the Deployment's arguments for a console outside the pod:
// the session key the pod mounts from its Secret is written to a file of the
// test.
func localArgs(t *testing.T, c *testCluster, d *appsv1.Deployment) []string {
	t.Helper()
	const sessionKeyFlag = "--session-key-file="
	args := d.Spec.Template.Spec.Containers[0].Args
	out := make([]string, 0, len(args))
	for _, a := range args {
		if strings.HasPrefix(a, sessionKeyFlag) {
			var secret string
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "session-key" && v.Secret != nil {
					secret = v.Secret.SecretName
				}
			}
			key, err := c.kube.CoreV1().Secrets(d.Namespace).Get(context.Background(), secret, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the release's session key: %v", err)
			}
			path := filepath.Join(t.TempDir(), "session-key")
			if err := os.WriteFile(path, key.Data["key"], 0o600); err != nil {
				t.Fatal(err)
			}
			a = sessionKeyFlag + path
		}
		// The pod's metrics port, on all addresses: a free one on loopback
		// here.
		if strings.HasPrefix(a, "--metrics-listen=") {
			a = "--metrics-listen=" + freeLoopbackAddr(t)
		}
		if strings.HasPrefix(a, "--") && strings.Contains(a, "=/etc/") {
			t.Fatalf("%s names a file only the pod has", a)
		}
		out = append(out, a)
	}
	return out
}

// serviceAccountKubeconfig writes a kubeconfig for the sandbox's apiserver
// that authenticates with a token of the ServiceAccount (TokenRequest API).
func serviceAccountKubeconfig(t *testing.T, c *testCluster, ns, sa string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, sa, err)
	}
	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range cfg.AuthInfos {
		user.Token, user.TokenFile, user.Username, user.Password = tr.Status.Token, "", "", ""
		user.ClientCertificate, user.ClientCertificateData, user.ClientKey, user.ClientKeyData = "", nil, "", nil
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startConsole runs the console until the test ends and waits until base
// answers /readyz (its informers synced); it returns the console's output.
func startConsole(t *testing.T, bin string, args []string, base string) *testenv.SyncBuffer {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("console output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return logs
			}
			err = errors.New(resp.Status)
		}
		select {
		case <-exited:
			t.Fatalf("the console exited before it was ready:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console was not ready after 60 s (%v):\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
