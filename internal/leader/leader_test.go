package leader

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/openquota/console/sandbox/sandboxtest"
)

// The helper process: a replica that campaigns and, once leading, says so
// on stdout and runs until it is killed.
func TestMain(m *testing.M) {
	if os.Getenv("LEADER_HELPER") == "1" {
		helper()
		return
	}
	os.Exit(m.Run())
}

func helper() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	err = Run(context.Background(), Config{Client: client, Namespace: os.Getenv("LEASE_NAMESPACE"), Name: os.Getenv("LEASE_NAME"), Identity: os.Getenv("LEASE_IDENTITY")},
		func(ctx context.Context) {
			fmt.Println("LEADING")
			<-ctx.Done()
		}, nil)
	fmt.Println("ERROR", err)
	os.Exit(1)
}

// sandboxClient is a client of the test sandbox and a namespace of the test's own.
func sandboxClient(t *testing.T) (kubernetes.Interface, string, string) {
	t.Helper()
	env := sandboxtest.Env(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ns := "leader-" + rand.String(5)
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return client, env.Kubeconfig, ns
}

// startHelper runs a replica in its own process and waits until it leads.
func startHelper(t *testing.T, kubeconfig, ns, lease, identity string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEADER_HELPER=1", "KUBECONFIG="+kubeconfig, "LEASE_NAMESPACE="+ns, "LEASE_NAME="+lease, "LEASE_IDENTITY="+identity)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	leading := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); line == "LEADING" || strings.HasPrefix(line, "ERROR") {
				leading <- line
				return
			}
		}
		leading <- "exited"
	}()
	select {
	case line := <-leading:
		if line != "LEADING" {
			t.Fatalf("helper %s: %s", identity, line)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("helper %s never led", identity)
	}
	return cmd
}

// The holder is killed (it does not release the Lease): the other replica
// takes over once the Lease expires. Measured over several runs; the
// takeover times are logged (go test -v).
func TestTakeoverAfterTheHolderIsKilled(t *testing.T) {
	client, kubeconfig, ns := sandboxClient(t)
	runs := 3
	if n, err := fmt.Sscan(os.Getenv("LEADER_TAKEOVER_RUNS"), &runs); n != 1 || err != nil {
		runs = 3
	}
	var times []time.Duration
	for i := range runs {
		lease := fmt.Sprintf("history-recorder-%d", i)
		holder := startHelper(t, kubeconfig, ns, lease, "replica-a")

		ctx, cancel := context.WithCancel(context.Background())
		leading := make(chan time.Time, 1)
		var starts atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Run(ctx, Config{Client: client, Namespace: ns, Name: lease, Identity: "replica-b"}, func(ctx context.Context) {
				starts.Add(1)
				leading <- time.Now()
				<-ctx.Done()
			}, nil)
		}()
		// replica-b follows: the work runs only on the holder.
		time.Sleep(3 * time.Second)
		if n := starts.Load(); n != 0 {
			t.Fatalf("run %d: replica-b started while replica-a held the lease", i)
		}
		if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		select {
		case at := <-leading:
			times = append(times, at.Sub(killed))
		case <-time.After(60 * time.Second):
			t.Fatalf("run %d: replica-b did not take over within 60 s of the holder's death", i)
		}
		l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := *l.Spec.HolderIdentity; got != "replica-b" {
			t.Errorf("run %d: lease held by %q", i, got)
		}
		cancel()
		<-done
		// Stopping normally releases the lease at once.
		l, err = client.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			t.Errorf("run %d: replica-b stopped but the lease still names %q", i, *l.Spec.HolderIdentity)
		}
	}
	slices.Sort(times)
	t.Logf("takeover after the holder was killed, %d runs: %v (median %v, max %v)", len(times), times, times[len(times)/2], times[len(times)-1])
}

// A replica that stops normally releases the Lease: the other takes over
// within a retry.
func TestTakeoverAfterARelease(t *testing.T) {
	client, _, ns := sandboxClient(t)
	replica := func(identity string, started chan<- string, stopped chan<- string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Run(ctx, Config{Client: client, Namespace: ns, Name: "recorder", Identity: identity},
				func(ctx context.Context) { started <- identity; <-ctx.Done() },
				func() { stopped <- identity })
		}()
		return cancel, done
	}
	started, stopped := make(chan string, 4), make(chan string, 4)
	stopA, doneA := replica("a", started, stopped)
	if got := <-started; got != "a" {
		t.Fatalf("%s started first", got)
	}
	stopB, doneB := replica("b", started, stopped)
	defer func() { stopB(); <-doneB }()
	stopA()
	<-doneA
	if got := <-stopped; got != "a" {
		t.Errorf("onStop ran for %q", got)
	}
	released := time.Now()
	select {
	case got := <-started:
		if got != "b" {
			t.Errorf("%s started", got)
		}
		t.Logf("takeover after a release: %v", time.Since(released))
	case <-time.After(30 * time.Second):
		t.Fatal("b did not take over after a release")
	}
}

func TestRunNeedsALease(t *testing.T) {
	if err := Run(context.Background(), Config{}, func(context.Context) {}, nil); err == nil {
		t.Error("Run without a client and a lease did not fail")
	}
}
