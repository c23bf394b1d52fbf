package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// A pod holding GPUs on a fake node shows up in Prometheus with
// dcgm-exporter's metric names and labels, as on a real cluster.
func TestGPUMetricsReachPrometheus(t *testing.T) {
	env := sandboxtest.Env(t)
	kube := testenv.SandboxClients(t, env).Kube
	ctx := context.Background()
	ns := testenv.Namespace(t, kube, "dcgm")

	var node sandbox.FakeNode
	for _, n := range sandbox.Fleet() {
		if n.Shape.Type == "ml.g6.12xlarge" && !n.NotReady {
			node = n
		}
	}
	gpus := resource.MustParse("2")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: ns, Annotations: map[string]string{sandbox.GPUUtilAnnotation: "85"}},
		Spec: corev1.PodSpec{
			NodeName:   node.Name,
			Containers: []corev1.Container{{Name: "trainer", Image: "trainer", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{sandbox.ResourceGPU: gpus}}}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	client, err := promapi.NewClient(promapi.Config{Address: env.PrometheusURL})
	if err != nil {
		t.Fatal(err)
	}
	prom := promv1.NewAPI(client)
	query := `DCGM_FI_DEV_GPU_UTIL{namespace="` + ns + `",pod="busy",container="trainer"}`
	var vec model.Vector
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 40*time.Second, true, func(ctx context.Context) (bool, error) {
		v, _, _, err := prom.Query(ctx, query, time.Now())
		if err != nil {
			return false, err
		}
		vec, _ = v.(model.Vector)
		return len(vec) == 2, nil
	})
	if err != nil {
		t.Fatalf("%s: want 2 series (one per GPU), got %v: %v", query, vec, err)
	}
	for _, s := range vec {
		if s.Value != 85 {
			t.Errorf("utilization %v, want the pinned 85", s.Value)
		}
		if got := string(s.Metric["Hostname"]); got != node.Name {
			t.Errorf("Hostname = %q, want %q", got, node.Name)
		}
		if got := string(s.Metric["modelName"]); got != "NVIDIA L4" {
			t.Errorf("modelName = %q", got)
		}
		if s.Metric["UUID"] == "" || s.Metric["gpu"] == "" {
			t.Errorf("series lacks UUID or gpu: %v", s.Metric)
		}
	}
}

// Up on a running instance is a no-op that returns the same Env.
func TestUpIsIdempotent(t *testing.T) {
	env := sandboxtest.Env(t)
	again, err := sandbox.Up(context.Background(), sandbox.Test)
	if err != nil {
		t.Fatal(err)
	}
	if *again != *env {
		t.Errorf("second Up returned %+v, want %+v", again, env)
	}
}

// The instance's PostgreSQL answers on its DSN, keeps its data in the
// instance's state folder, and does not run as root.
func TestPostgresServesTheInstance(t *testing.T) {
	env := sandboxtest.Env(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.PostgresDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(env.StateDir, "postgres"); dataDir != want {
		t.Errorf("data directory %q, want %q", dataDir, want)
	}
	db := "sandbox_" + rand.String(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatalf("the sandbox user cannot create databases: %v", err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
		t.Errorf("data directory owned by root: PostgreSQL runs as root")
	}
}
