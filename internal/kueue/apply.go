package kueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"time"

	"github.com/openquota/console/internal/domain"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Audit annotations on every object the console writes: who created it and
// when (set once), and who last changed it through the console and when
// (set only when an apply changes the object, so re-applying the same
// allocation leaves the object untouched).
const (
	CreatedByAnnotation = "quota-console.openquota.dev/created-by"
	CreatedAtAnnotation = "quota-console.openquota.dev/created-at"
	ChangedByAnnotation = "quota-console.openquota.dev/changed-by"
	ChangedAtAnnotation = "quota-console.openquota.dev/changed-at"
	// SystemActor is who changes are attributed to when the context names no user.
	SystemActor = "quota-console"
	// UnknownCreator is the created-by of objects that existed before the
	// console recorded creators; their created-at is their creationTimestamp.
	UnknownCreator = "unknown"
)

// Applier is the one path by which the console writes to the cluster:
// server-side apply with the console's field manager, with the console's own
// identity (its ServiceAccount, which the admission policy of deploy/rbac
// confines to what the console manages). Whether the signed-in user may make
// a change is asked before, with the permissions TeamWrites, PolicyWrites and
// DeleteTeamWrites list. Applying the same objects again after any failure
// converges on the same result. Every write carries audit annotations, and
// every change of a team or of the policy is recorded as a revision (see
// revisions.go) and announced as a Kubernetes Event.
type Applier struct {
	Kube  kubernetes.Interface
	Kueue kueueclient.Interface
	// Log receives failures that do not fail a change (Events are best
	// effort); nil discards them.
	Log *slog.Logger
	// Now is the clock of audit annotations and revisions; nil means time.Now.
	Now func() time.Time
}

func applyOptions() metav1.ApplyOptions {
	// Force: the console owns the fields it manages; a hand edit of them is
	// drift that the next save corrects.
	return metav1.ApplyOptions{FieldManager: domain.FieldManager, Force: true}
}

// records writes what the console records itself: revision histories and
// Events, which no user may write.
func (a Applier) records() kubernetes.Interface { return a.Kube }

func (a Applier) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return a.Log
}

// applyRun is one apply: who, when, and whether it changed anything.
type applyRun struct {
	by      string
	at      time.Time
	changed bool
}

func (a Applier) begin(ctx context.Context) *applyRun {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	by := ActorFrom(ctx)
	if by == "" {
		by = SystemActor
	}
	return &applyRun{by: by, at: now().UTC().Truncate(time.Second)}
}

func (c *applyRun) stamp() string { return c.at.Format(time.RFC3339) }

// annotations are the audit annotations of an object: live is the object as
// it is (nil when it does not exist yet); changing says whether this write
// changes it (else the last change's who and when stay).
func (c *applyRun) annotations(live metav1.Object, changing bool) map[string]string {
	m := map[string]string{
		CreatedByAnnotation: c.by, CreatedAtAnnotation: c.stamp(),
		ChangedByAnnotation: c.by, ChangedAtAnnotation: c.stamp(),
	}
	if live == nil || reflect.ValueOf(live).IsNil() {
		return m
	}
	old := live.GetAnnotations()
	m[CreatedByAnnotation], m[CreatedAtAnnotation] = UnknownCreator, live.GetCreationTimestamp().UTC().Format(time.RFC3339)
	if v := old[CreatedByAnnotation]; v != "" {
		m[CreatedByAnnotation] = v
	}
	if v := old[CreatedAtAnnotation]; v != "" {
		m[CreatedAtAnnotation] = v
	}
	if !changing && old[ChangedByAnnotation] != "" && old[ChangedAtAnnotation] != "" {
		m[ChangedByAnnotation], m[ChangedAtAnnotation] = old[ChangedByAnnotation], old[ChangedAtAnnotation]
	}
	return m
}

// object is a typed Kubernetes object as the clientsets return it.
type object interface {
	metav1.Object
	runtime.Object
}

// annotatable is an apply configuration (a pointer) that takes annotations.
type annotatable[AC any] interface {
	WithAnnotations(map[string]string) AC
}

// written is what one audited apply found and did.
type written[T object] struct {
	before  T // the object before the apply; nil when it did not exist
	after   T
	changed bool
}

func (w written[T]) existed() bool { return !reflect.ValueOf(w.before).IsNil() }

// applyAudited applies desired with audit annotations. It reads the object
// first: absent, it is created with all four annotations; present, a dry run
// with the last change's annotations tells whether the apply would change
// anything, and only then is it written, as changed now by c's user. desired
// itself is not modified.
func applyAudited[T object, AC annotatable[AC]](ctx context.Context, c *applyRun, desired AC, name string,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	apply func(context.Context, AC, metav1.ApplyOptions) (T, error),
) (written[T], error) {
	var w written[T]
	live, err := get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return w, err
	default:
		w.before = live
		dry := metav1.ApplyOptions{FieldManager: domain.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
		keep, err := withAudit(desired, c.annotations(live, false))
		if err != nil {
			return w, err
		}
		would, err := apply(ctx, keep, dry)
		if err != nil {
			return w, err
		}
		if sameObject(live, would) {
			w.after = live
			return w, nil
		}
	}
	ac, err := withAudit(desired, c.annotations(w.before, true))
	if err != nil {
		return w, err
	}
	if w.after, err = apply(ctx, ac, applyOptions()); err != nil {
		return w, err
	}
	w.changed, c.changed = true, true
	return w, nil
}

// withAudit is a copy of an apply configuration with the audit annotations added.
func withAudit[AC annotatable[AC]](ac AC, annotations map[string]string) (AC, error) {
	var out AC
	data, err := json.Marshal(ac)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, err
	}
	return out.WithAnnotations(annotations), nil
}

// sameObject reports whether two versions of an object differ in more than
// bookkeeping (resource version, managed fields) and status.
func sameObject[T object](a, b T) bool {
	clean := func(o T) runtime.Object {
		c := o.DeepCopyObject()
		m := c.(metav1.Object)
		m.SetResourceVersion("")
		m.SetManagedFields(nil)
		m.SetGeneration(0)
		if s := reflect.ValueOf(c).Elem().FieldByName("Status"); s.IsValid() && s.CanSet() {
			s.SetZero()
		}
		return c
	}
	return equality.Semantic.DeepEqual(clean(a), clean(b))
}

// ErrNotManaged is a team the console does not manage (there is no such
// ClusterQueue, or it is not the console's).
var ErrNotManaged = errors.New("not a team managed by this console")

// flavorWrite is a ResourceFlavor the console writes, and whether it exists.
type flavorWrite struct {
	flavor *kueueac.ResourceFlavorApplyConfiguration
	exists bool
}

// flavorsToWrite are the team's ResourceFlavors the console writes: those
// that do not exist yet and those it manages. A flavor someone else made (an
// install's own, shared with other tenants) is used as it is: the console
// never takes it over.
func (a Applier) flavorsToWrite(ctx context.Context, flavors []*kueueac.ResourceFlavorApplyConfiguration) ([]flavorWrite, error) {
	var out []flavorWrite
	for _, rf := range flavors {
		live, err := a.Kueue.KueueV1beta2().ResourceFlavors().Get(ctx, *rf.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("resource flavor %s: %w", *rf.Name, err)
		case !domain.OwnsFlavor(live):
			continue
		}
		out = append(out, flavorWrite{flavor: rf, exists: err == nil})
	}
	return out, nil
}

// TeamWrites are the requests ApplyTeam makes of the apiserver for objs, as
// permissions: server-side apply of each object (patch, and create for one
// that does not exist yet), and binding the team member role. The console's
// own records (revision history, Event) are not among them: no user writes
// those.
func (a Applier) TeamWrites(ctx context.Context, objs domain.TeamObjects) ([]Permission, error) {
	var out []Permission
	add := func(group, resource, namespace, name string, get func() error) error {
		err := get()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s: %w", resource, name, err)
		}
		out = append(out, applying(group, resource, namespace, name, err == nil)...)
		return nil
	}
	kueue := kueuev1beta2.SchemeGroupVersion.Group
	if objs.Namespace != nil { // an imported queue's namespaces are its own
		ns := *objs.Namespace.Name
		if err := add("", "namespaces", "", ns, func() error {
			_, err := a.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		}); err != nil {
			return nil, err
		}
	}
	flavors, err := a.flavorsToWrite(ctx, objs.Flavors)
	if err != nil {
		return nil, err
	}
	for _, w := range flavors {
		out = append(out, applying(kueue, "resourceflavors", "", *w.flavor.Name, w.exists)...)
	}
	cq := *objs.ClusterQueue.Name
	if err := add(kueue, "clusterqueues", "", cq, func() error {
		_, err := a.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, cq, metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if lq := objs.LocalQueue; lq != nil {
		if err := add(kueue, "localqueues", *lq.Namespace, *lq.Name, func() error {
			_, err := a.Kueue.KueueV1beta2().LocalQueues(*lq.Namespace).Get(ctx, *lq.Name, metav1.GetOptions{})
			return err
		}); err != nil {
			return nil, err
		}
	}
	if rb := objs.Members; rb != nil {
		if err := add(rbacv1.GroupName, "rolebindings", *rb.Namespace, *rb.Name, func() error {
			_, err := a.Kube.RbacV1().RoleBindings(*rb.Namespace).Get(ctx, *rb.Name, metav1.GetOptions{})
			return err
		}); err != nil {
			return nil, err
		}
		// What Kubernetes asks of whoever binds a role they do not hold themselves.
		out = append(out, Permission{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: *rb.RoleRef.Name})
	}
	return out, nil
}

// applying is what a server-side apply of an object takes: patch, and
// create when the object does not exist yet.
func applying(group, resource, namespace, name string, exists bool) []Permission {
	patch := Permission{Verb: "patch", Group: group, Resource: resource, Namespace: namespace, Name: name}
	if exists {
		return []Permission{patch}
	}
	create := patch
	create.Verb = "create"
	return []Permission{create, patch}
}

// CheckTeam asks the apiserver, with Kueue's webhooks, to validate the team's
// ClusterQueue and flavors without writing anything (a dry run), so that a
// rejected allocation leaves nothing half-written.
func (a Applier) CheckTeam(ctx context.Context, objs domain.TeamObjects) error {
	opts := applyOptions()
	opts.DryRun = []string{metav1.DryRunAll}
	flavors, err := a.flavorsToWrite(ctx, objs.Flavors)
	if err != nil {
		return err
	}
	for _, w := range flavors {
		rf := w.flavor
		if _, err := a.Kueue.KueueV1beta2().ResourceFlavors().Apply(ctx, rf, opts); err != nil {
			return fmt.Errorf("resource flavor %s: %w", *rf.Name, err)
		}
	}
	if _, err := a.Kueue.KueueV1beta2().ClusterQueues().Apply(ctx, objs.ClusterQueue, opts); err != nil {
		return fmt.Errorf("cluster queue %s: %w", *objs.ClusterQueue.Name, err)
	}
	// In a namespace that exists already, the LocalQueue and the member
	// binding are judged too (a LocalQueue pointed elsewhere by hand cannot
	// be pointed back: its ClusterQueue is immutable), so that a refusal
	// comes before anything is written. In a new one they are the
	// namespace's first objects, which nobody else can have made.
	if objs.LocalQueue == nil {
		return nil
	}
	switch _, err := a.Kube.CoreV1().Namespaces().Get(ctx, *objs.LocalQueue.Namespace, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("namespace %s: %w", *objs.LocalQueue.Namespace, err)
	}
	if _, err := a.Kueue.KueueV1beta2().LocalQueues(*objs.LocalQueue.Namespace).Apply(ctx, objs.LocalQueue, opts); err != nil {
		return fmt.Errorf("local queue %s: %w", *objs.LocalQueue.Name, err)
	}
	if objs.Members != nil {
		if _, err := a.Kube.RbacV1().RoleBindings(*objs.Members.Namespace).Apply(ctx, objs.Members, opts); err != nil {
			return fmt.Errorf("role binding %s: %w", *objs.Members.Name, err)
		}
	}
	return nil
}

// ApplyTeam writes a team's objects in dependency order, then records the
// change as a revision of the team and announces it with an Event
// on the ClusterQueue. A failure at any point leaves what was written in
// place; applying the same objects again finishes the job, including the
// revision. Re-applying an unchanged team writes nothing.
func (a Applier) ApplyTeam(ctx context.Context, objs domain.TeamObjects) error {
	c := a.begin(ctx)
	var steps writeSteps
	if objs.Namespace != nil {
		namespaces := a.Kube.CoreV1().Namespaces()
		what := "namespace " + *objs.Namespace.Name
		if err := notOthers(namespaces.Get(ctx, *objs.Namespace.Name, metav1.GetOptions{})); err != nil {
			return steps.failed(fmt.Errorf("%s: %w", what, err))
		}
		if _, err := applyAudited(ctx, c, objs.Namespace, *objs.Namespace.Name, namespaces.Get, namespaces.Apply); err != nil {
			return steps.failed(fmt.Errorf("%s: %w", what, err))
		}
		steps.wrote(what)
	}
	toWrite, err := a.flavorsToWrite(ctx, objs.Flavors)
	if err != nil {
		return steps.failed(err)
	}
	flavors := a.Kueue.KueueV1beta2().ResourceFlavors()
	for _, w := range toWrite {
		rf := w.flavor
		what := "resource flavor " + *rf.Name
		if _, err := applyAudited(ctx, c, rf, *rf.Name, flavors.Get, flavors.Apply); err != nil {
			return steps.failed(fmt.Errorf("%s: %w", what, err))
		}
		steps.wrote(what)
	}
	cqs := a.Kueue.KueueV1beta2().ClusterQueues()
	what := "cluster queue " + *objs.ClusterQueue.Name
	cq, err := applyAudited(ctx, c, objs.ClusterQueue, *objs.ClusterQueue.Name, cqs.Get, cqs.Apply)
	if err != nil {
		return steps.failed(fmt.Errorf("%s: %w", what, err))
	}
	steps.wrote(what)
	if objs.LocalQueue != nil {
		lqs := a.Kueue.KueueV1beta2().LocalQueues(*objs.LocalQueue.Namespace)
		what := "local queue " + *objs.LocalQueue.Name
		if _, err := applyAudited(ctx, c, objs.LocalQueue, *objs.LocalQueue.Name, lqs.Get, lqs.Apply); err != nil {
			return steps.failed(fmt.Errorf("%s: %w", what, err))
		}
		steps.wrote(what)
	}
	if objs.Members != nil {
		bindings := a.Kube.RbacV1().RoleBindings(*objs.Members.Namespace)
		what := "member binding " + *objs.Members.Name
		if _, err := applyAudited(ctx, c, objs.Members, *objs.Members.Name, bindings.Get, bindings.Apply); err != nil {
			return steps.failed(fmt.Errorf("%s: %w", what, err))
		}
		steps.wrote(what)
	}
	if err := a.recordTeam(ctx, c, objs, cq); err != nil {
		return steps.failed(err)
	}
	return nil
}

// CheckPolicy dry-runs a policy's priority classes and cohort: the
// apiserver (and Kueue's webhooks) judge them without anything written.
func (a Applier) CheckPolicy(ctx context.Context, s domain.Settings, p domain.Policy) error {
	opts := applyOptions()
	opts.DryRun = []string{metav1.DryRunAll}
	for _, wpc := range domain.BuildPriorityClasses(s, p) {
		if _, err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().Apply(ctx, wpc, opts); err != nil {
			return fmt.Errorf("priority class %s: %w", *wpc.Name, err)
		}
	}
	cohort, err := domain.BuildCohort(s, p)
	if err != nil {
		return err
	}
	if _, err := a.Kueue.KueueV1beta2().Cohorts().Apply(ctx, cohort, opts); err != nil {
		return fmt.Errorf("cohort %s: %w", s.Cohort, err)
	}
	return nil
}

// PolicyWrites are the requests ApplyPolicy makes of the apiserver for p, as
// permissions: server-side apply of each priority class and of the cohort
// (patch, and create for one that does not exist yet), and deleting the
// classes of this policy it no longer lists.
func (a Applier) PolicyWrites(ctx context.Context, s domain.Settings, p domain.Policy) ([]Permission, error) {
	kueue := kueuev1beta2.SchemeGroupVersion.Group
	var out []Permission
	for _, wpc := range domain.BuildPriorityClasses(s, p) {
		_, err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, *wpc.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("priority class %s: %w", *wpc.Name, err)
		}
		out = append(out, applying(kueue, "workloadpriorityclasses", "", *wpc.Name, err == nil)...)
	}
	removed, err := a.removedPriorityClasses(ctx, s, p)
	if err != nil {
		return nil, err
	}
	for _, name := range removed {
		out = append(out, Permission{Verb: "delete", Group: kueue, Resource: "workloadpriorityclasses", Name: name})
	}
	_, err = a.Kueue.KueueV1beta2().Cohorts().Get(ctx, s.Cohort, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("cohort %s: %w", s.Cohort, err)
	}
	return append(out, applying(kueue, "cohorts", "", s.Cohort, err == nil)...), nil
}

// removedPriorityClasses are the classes of this console's policy
// (Settings.OwnsPriorityClass) that p no longer lists.
func (a Applier) removedPriorityClasses(ctx context.Context, s domain.Settings, p domain.Policy) ([]string, error) {
	keep := map[string]bool{}
	for _, pc := range p.Classes {
		keep[pc.Name] = true
	}
	managed, err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().List(ctx, metav1.ListOptions{LabelSelector: domain.ManagedByLabel + "=" + domain.ManagedByValue})
	if err != nil {
		return nil, fmt.Errorf("priority classes: %w", err)
	}
	var out []string
	for _, wpc := range managed.Items {
		if !keep[wpc.Name] && s.OwnsPriorityClass(&wpc) {
			out = append(out, wpc.Name)
		}
	}
	return out, nil
}

// DeleteTeamWrites are the requests DeleteTeam makes of the apiserver, as
// permissions: deleting the team's LocalQueue, ClusterQueue and namespace.
func DeleteTeamWrites(s domain.Settings, team string) []Permission {
	kueue := kueuev1beta2.SchemeGroupVersion.Group
	return []Permission{
		{Verb: "delete", Group: kueue, Resource: "localqueues", Namespace: s.Namespace(team), Name: s.LocalQueue(team)},
		{Verb: "delete", Group: kueue, Resource: "clusterqueues", Name: s.ClusterQueue(team)},
		{Verb: "delete", Resource: "namespaces", Name: s.Namespace(team)},
	}
}

// CheckDeleteTeam dry-runs the deletion of a team's objects.
func (a Applier) CheckDeleteTeam(ctx context.Context, s domain.Settings, team string) error {
	return a.deleteTeam(ctx, s, team, []string{metav1.DryRunAll})
}

// DeleteTeam removes what the console created for a team: its LocalQueue,
// namespace (with the team's jobs and member binding), revision history
// and, last, its ClusterQueue. Shared ResourceFlavors stay. Deleting what
// is already gone is not an error, and the ClusterQueue, by which the
// console knows the team, goes last: after a failure the team is still
// there to delete again, and the retry finishes the job.
func (a Applier) DeleteTeam(ctx context.Context, s domain.Settings, team string) error {
	return a.deleteTeam(ctx, s, team, nil)
}

func ignoreMissing(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (a Applier) deleteTeam(ctx context.Context, s domain.Settings, team string, dryRun []string) error {
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background, DryRun: dryRun}
	steps := writeSteps{deleting: true}
	// A dry run writes nothing: its failure is only its own.
	fail := func(err error) error {
		if dryRun != nil {
			return err
		}
		return steps.failed(err)
	}
	if err := ignoreMissing(a.Kueue.KueueV1beta2().LocalQueues(s.Namespace(team)).Delete(ctx, s.LocalQueue(team), opts)); err != nil {
		return fail(fmt.Errorf("local queue: %w", err))
	}
	steps.wrote("local queue " + s.LocalQueue(team) + " deleted")
	// The namespace goes only when it is the console's: one someone else
	// made (and labelled otherwise since) stays, with what is in it.
	switch err := notOthers(a.Kube.CoreV1().Namespaces().Get(ctx, s.Namespace(team), metav1.GetOptions{})); {
	case errors.Is(err, ErrNotTheConsoles):
	case err != nil:
		return fail(fmt.Errorf("namespace: %w", err))
	default:
		if err := ignoreMissing(a.Kube.CoreV1().Namespaces().Delete(ctx, s.Namespace(team), opts)); err != nil {
			return fail(fmt.Errorf("namespace: %w", err))
		}
		steps.wrote("namespace " + s.Namespace(team) + " deleted")
	}
	if dryRun == nil {
		if err := ignoreMissing(a.records().CoreV1().ConfigMaps(s.State()).Delete(ctx, domain.TeamRevisionsName(s, team), metav1.DeleteOptions{})); err != nil {
			return fail(fmt.Errorf("revision history: %w", err))
		}
		steps.wrote("revision history deleted")
	}
	if err := ignoreMissing(a.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, s.ClusterQueue(team), opts)); err != nil {
		return fail(fmt.Errorf("cluster queue: %w", err))
	}
	return nil
}

// ErrNotTheConsoles: the object exists and the console did not make it.
// The console takes over nothing it did not make, whatever its credentials
// allow (a cluster admin's kubeconfig, a cluster without the admission
// policy).
var ErrNotTheConsoles = errors.New("it exists and is not managed by this console, which takes over nothing it did not make")

// notOthers is nil for an object that does not exist or is the console's,
// ErrNotTheConsoles for one someone else made, and the read's error else.
func notOthers(obj metav1.Object, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !domain.ManagedByConsole(obj):
		return ErrNotTheConsoles
	}
	return nil
}

func (a Applier) applyPriorityClasses(ctx context.Context, c *applyRun, s domain.Settings, p domain.Policy) error {
	wpcs := a.Kueue.KueueV1beta2().WorkloadPriorityClasses()
	for _, wpc := range domain.BuildPriorityClasses(s, p) {
		switch live, err := wpcs.Get(ctx, *wpc.Name, metav1.GetOptions{}); {
		case err == nil && !s.OwnsPriorityClass(live):
			return fmt.Errorf("priority class %s: %w", *wpc.Name, ErrNotTheConsoles)
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("priority class %s: %w", *wpc.Name, err)
		}
		if _, err := applyAudited(ctx, c, wpc, *wpc.Name, wpcs.Get, wpcs.Apply); err != nil {
			return fmt.Errorf("priority class %s: %w", *wpc.Name, err)
		}
	}
	return nil
}

// ApplyPolicy writes the priority classes, removes the classes of this
// policy (Settings.OwnsPriorityClass) that it no longer lists, records the
// policy on the cohort, then records the change
// as a revision of the policy and announces it with an Event on the
// cohort. Every step is idempotent, so a retry after a failure converges.
func (a Applier) ApplyPolicy(ctx context.Context, s domain.Settings, p domain.Policy) error {
	c := a.begin(ctx)
	if err := a.applyPriorityClasses(ctx, c, s, p); err != nil {
		return err
	}
	removed, err := a.removedPriorityClasses(ctx, s, p)
	if err != nil {
		return err
	}
	for _, name := range removed {
		err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing priority class %s: %w", name, err)
		}
		c.changed = c.changed || err == nil
	}
	cohort, err := domain.BuildCohort(s, p)
	if err != nil {
		return err
	}
	cohorts := a.Kueue.KueueV1beta2().Cohorts()
	cw, err := applyAudited(ctx, c, cohort, s.Cohort, cohorts.Get, cohorts.Apply)
	if err != nil {
		return fmt.Errorf("cohort %s: %w", s.Cohort, err)
	}
	return a.recordPolicy(ctx, c, s, p, cw)
}

// EnsureNamespace creates the console's own namespace when it lacks (a
// local run: installs create it, and the console's service account may not
// create namespaces; that refusal is only logged).
func EnsureNamespace(ctx context.Context, kube kubernetes.Interface, name string, log *slog.Logger) {
	if _, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return
	}
	if err := createStateNamespace(ctx, kube, name); err != nil {
		log.Debug("creating the state namespace", "err", err)
	}
}

// createStateNamespace creates the console's own namespace, where it keeps
// the revision histories.
func createStateNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{domain.ManagedByLabel: domain.ManagedByValue}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: domain.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}
