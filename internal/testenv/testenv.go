// Package testenv prepares the test sandbox for a test and cleans up after
// it: a fresh PostgreSQL database, the console's RBAC and users bound to
// its roles, priority classes, Jobs and Workloads in a team's queue, and
// waiting for what Kueue makes of them. Everything it creates has a unique name and is
// removed when the test ends.
//
// It is for tests only; it may import the console's deploy and sandbox
// packages, and the clients, but none of the console's own packages beyond
// them.
package testenv

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// Clients are the sandbox's clients, as its administrator.
type Clients struct {
	Kube  kubernetes.Interface
	Kueue kueueclient.Interface
}

// SandboxClients connects to env as its administrator.
func SandboxClients(t testing.TB, env *sandbox.Env) Clients {
	t.Helper()
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return Clients{Kube: kubernetes.NewForConfigOrDie(cfg), Kueue: kueueclient.NewForConfigOrDie(cfg)}
}

// Namespace creates a namespace named prefix-<random> and removes it when
// the test ends.
func Namespace(t testing.TB, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	ns := prefix + "-" + rand.String(5)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// FreshPostgres creates a database on the sandbox's PostgreSQL server and
// returns its DSN; the database is dropped when the test ends.
func FreshPostgres(t testing.TB) string {
	t.Helper()
	return FreshPostgresOn(t, sandboxtest.Env(t).PostgresDSN)
}

// FreshPostgresOn creates a database on the server of admin (a DSN that
// may create databases) and returns its DSN; it is dropped when the test
// ends.
func FreshPostgresOn(t testing.TB, admin string) string {
	t.Helper()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	name := "hp_" + rand.String(10)
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		db.Close()
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

var (
	installRBAC    sync.Once
	installRBACErr error
)

// ConsoleRBAC installs deploy/rbac on the sandbox, once per test binary.
func ConsoleRBAC(t testing.TB) {
	t.Helper()
	installRBAC.Do(func() {
		cfg, err := sandboxtest.Env(t).RESTConfig()
		if err != nil {
			installRBACErr = err
			return
		}
		installRBACErr = rbac.Apply(context.Background(), cfg, "quota-console-tests")
	})
	if installRBACErr != nil {
		t.Fatalf("installing deploy/rbac: %v", installRBACErr)
	}
}

// BindUser binds user to ClusterRole role until the test ends, and waits
// until the apiserver's authorizer knows it (it sees a new binding a moment
// later, and a console asked before would remember a "no" for half a
// minute): until the role's first rule holds for the user.
func BindUser(t testing.TB, kube kubernetes.Interface, user, role string) {
	t.Helper()
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-" + user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	cr, err := kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil || len(cr.Rules) == 0 {
		t.Fatalf("ClusterRole %s: %v", role, err)
	}
	rule := cr.Rules[0]
	attrs := &authzv1.ResourceAttributes{Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0]}
	if len(rule.ResourceNames) > 0 {
		attrs.Name = rule.ResourceNames[0]
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: attrs,
		}}, metav1.CreateOptions{})
		return err == nil && res.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the binding of %s to %s never took effect", user, role)
	}
}

// PriorityClass creates the WorkloadPriorityClass name of value until the
// test ends.
func PriorityClass(t testing.TB, kq kueueclient.Interface, name string, value int32) {
	t.Helper()
	wpc := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := kq.KueueV1beta2().WorkloadPriorityClasses().Create(context.Background(), wpc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kq.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// Job is a suspended batch Job for a team's queue: Pods pods (1 when 0) of
// GPUs GPUs, or Neuron Neuron devices when not 0, one vCPU and 1 GiB each,
// of priority Class ("" for none), on nodes of InstanceType when set;
// RunFor > 0 makes its pods complete after that long.
type Job struct {
	Namespace, LocalQueue, Name, Class string
	Pods                               int32
	GPUs, Neuron                       int64
	// Partitions of the MIG profile Partition ("mig-1g.10gb") each pod
	// asks for, instead of GPUs.
	Partition    string
	Partitions   int64
	InstanceType string
	RunFor       time.Duration
	// GPUUtil pins the utilization the sandbox's dcgm-exporter reports for
	// the pods' GPUs ("2"); "" leaves it to the exporter.
	GPUUtil string
}

// podRequests are one pod's requests: gpus GPUs, or neuron Neuron devices
// when not 0, one vCPU and 1 GiB.
func podRequests(gpus, neuron int64) corev1.ResourceList {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if neuron > 0 {
		res[sandbox.ResourceNeuron] = *resource.NewQuantity(neuron, resource.DecimalSI)
	} else {
		res[sandbox.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return res
}

// onInstanceType is the node selector of an instance type's nodes (nil for
// any node).
func onInstanceType(instanceType string) map[string]string {
	if instanceType == "" {
		return nil
	}
	return map[string]string{corev1.LabelInstanceTypeStable: instanceType}
}

// Submit creates the Job; Kueue makes its Workload.
func Submit(t testing.TB, kube kubernetes.Interface, j Job) *batchv1.Job {
	t.Helper()
	res := podRequests(j.GPUs, j.Neuron)
	if j.Partitions > 0 {
		delete(res, sandbox.ResourceGPU)
		res[domain.PartitionResource(j.Partition)] = *resource.NewQuantity(j.Partitions, resource.DecimalSI)
	}
	pods := max(j.Pods, 1)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, Labels: map[string]string{"kueue.x-k8s.io/queue-name": j.LocalQueue}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Parallelism: ptr.To(pods), Completions: ptr.To(pods), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: onInstanceType(j.InstanceType),
				Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}},
		}},
	}
	if j.Class != "" {
		job.Labels["kueue.x-k8s.io/priority-class"] = j.Class
	}
	if j.RunFor > 0 {
		job.Spec.Template.Annotations[sandbox.PodCompleteDelay] = j.RunFor.String()
	}
	if j.GPUUtil != "" {
		job.Spec.Template.Annotations[sandbox.GPUUtilAnnotation] = j.GPUUtil
	}
	job, err := kube.BatchV1().Jobs(j.Namespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// PodSet is one pod set of a Workload: Pods pods of GPUs GPUs or Neuron
// Neuron devices, one vCPU and 1 GiB each, on nodes of InstanceType.
type PodSet struct {
	Pods         int32
	GPUs, Neuron int64
	InstanceType string
}

// SubmitWorkload creates a Workload of several pod sets (a batch Job has
// one) without a Job in a LocalQueue of namespace ns; Kueue admits it on
// quota alone. It is deleted when the test ends.
func SubmitWorkload(t testing.TB, kq kueueclient.Interface, ns, lq, name string, podSets []PodSet) *kueuev1beta2.Workload {
	t.Helper()
	wl := &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kueuev1beta2.WorkloadSpec{QueueName: kueuev1beta2.LocalQueueName(lq)}}
	for i, ps := range podSets {
		res := podRequests(ps.GPUs, ps.Neuron)
		wl.Spec.PodSets = append(wl.Spec.PodSets, kueuev1beta2.PodSet{Name: kueuev1beta2.PodSetReference(fmt.Sprintf("pods-%d", i)), Count: ps.Pods,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: onInstanceType(ps.InstanceType),
				Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}}})
	}
	wl, err := kq.KueueV1beta2().Workloads(ns).Create(context.Background(), wl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Workload %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kq.KueueV1beta2().Workloads(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return wl
}

// WorkloadOf waits (up to a minute) for the Job's Workload to meet cond and
// returns it.
func WorkloadOf(t testing.TB, kq kueueclient.Interface, j *batchv1.Job, what string, cond func(*kueuev1beta2.Workload) bool) *kueuev1beta2.Workload {
	t.Helper()
	var found *kueuev1beta2.Workload
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		wls, err := kq.KueueV1beta2().Workloads(j.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range wls.Items {
			if w := &wls.Items[i]; metav1.IsControlledBy(w, j) && cond(w) {
				found = w
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s/%s never %s", j.Namespace, j.Name, what)
	}
	return found
}

// CondTrue is a Workload's condition typ being true.
func CondTrue(typ string) func(*kueuev1beta2.Workload) bool {
	return func(w *kueuev1beta2.Workload) bool { return apimeta.IsStatusConditionTrue(w.Status.Conditions, typ) }
}

// FinishedWorkload creates a Workload (no Job) in namespace ns on
// LocalQueue lq and marks it Finished with message, which may be hostile:
// Kueue leaves a finished Workload's status alone, so the message stays
// what the test set (as a Kueue-integrated controller could set it). It is
// deleted when the test ends.
func FinishedWorkload(t testing.TB, kq kueueclient.Interface, ns, lq, name, message string) {
	t.Helper()
	ctx := context.Background()
	wls := kq.KueueV1beta2().Workloads(ns)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kueuev1beta2.WorkloadSpec{
			QueueName: kueuev1beta2.LocalQueueName(lq),
			PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res}}},
			}}}},
		},
	}
	if _, err := wls.Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Workload %s: %v", name, err)
	}
	t.Cleanup(func() { _ = wls.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := wls.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: kueuev1beta2.WorkloadFinished,
			Status: metav1.ConditionTrue, Reason: kueuev1beta2.WorkloadFinishedReasonSucceeded, Message: message})
		_, err = wls.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("finishing Workload %s: %v", name, err)
	}
}

// ConsoleConfig is a client configuration holding the console
// ServiceAccount's token (deploy/rbac installed first): requests made with it
// are the console's own.
func ConsoleConfig(t testing.TB) *rest.Config {
	t.Helper()
	ConsoleRBAC(t)
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	sa, err := rbac.AsConsole(context.Background(), cfg, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

// SyncBuffer collects a process's output while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// AgreementSuite runs the test only as one of the suites that measure the
// console's previews against the real Kueue (AGREEMENT_SUITES=1, make
// test's second step, `make agreement`): they keep Kueue busy with dozens of
// teams at once, which would slow every other test sharing the sandbox.
func AgreementSuite(t testing.TB) {
	t.Helper()
	if os.Getenv("AGREEMENT_SUITES") != "1" {
		t.Skip("an agreement suite: make test runs it after the others (AGREEMENT_SUITES=1, make agreement)")
	}
}
