package impact

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// copyClient is the only client Kueue's code gets during a preview. It reads
// from the in-memory copy and takes the scheduler's writes (admissions,
// evictions, pending reasons) into the copy; it cannot reach the apiserver.
type copyClient struct {
	scheme     *runtime.Scheme
	namespaces map[string]*corev1.Namespace

	mu        sync.Mutex
	workloads map[string]*kueue.Workload
	// evicted are the Workloads the scheduler evicted, in order, and
	// admitted those it admitted, not yet taken in by the preview's loop.
	evicted  []eviction
	admitted []string
}

// eviction is one Workload the scheduler evicted: Kueue's reason and, for
// a preemption, its condition's reason and message.
type eviction struct {
	key             string
	reason          string
	preemptedReason string
	message         string
}

var errWriteInPreview = errors.New("the impact preview does not write")

func (c *copyClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := obj.(type) {
	case *kueue.Workload:
		wl, ok := c.workloads[key.Namespace+"/"+key.Name]
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{Group: kueue.SchemeGroupVersion.Group, Resource: "workloads"}, key.Name)
		}
		wl.DeepCopyInto(o)
		return nil
	case *corev1.Namespace:
		ns, ok := c.namespaces[key.Name]
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
		}
		ns.DeepCopyInto(o)
		return nil
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "objects"}, key.Name)
}

// List answers empty lists: the preview hands Kueue's caches every object
// itself (LimitRanges and RuntimeClasses are already in a Shape's
// requests).
func (c *copyClient) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func (c *copyClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errWriteInPreview
}
func (c *copyClient) Create(context.Context, client.Object, ...client.CreateOption) error {
	return errWriteInPreview
}
func (c *copyClient) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return errWriteInPreview
}
func (c *copyClient) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return c.take(obj)
}
func (c *copyClient) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	return c.take(obj)
}
func (c *copyClient) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errWriteInPreview
}
func (c *copyClient) Status() client.SubResourceWriter            { return statusWriter{c} }
func (c *copyClient) SubResource(string) client.SubResourceClient { return statusWriter{c} }
func (c *copyClient) Scheme() *runtime.Scheme                     { return c.scheme }
func (c *copyClient) RESTMapper() apimeta.RESTMapper              { return nil }
func (c *copyClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
}
func (c *copyClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	_, cluster := obj.(*corev1.Namespace)
	return !cluster, nil
}

// take applies the scheduler's write of a Workload's status to the copy.
// Kueue writes the whole status it means (server-side apply of what it
// set), so the conditions it names replace the copy's.
func (c *copyClient) take(obj client.Object) error {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return errWriteInPreview
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := wl.Namespace + "/" + wl.Name
	cur, ok := c.workloads[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: kueue.SchemeGroupVersion.Group, Resource: "workloads"}, wl.Name)
	}
	next := cur.DeepCopy()
	for _, cond := range wl.Status.Conditions {
		apimeta.SetStatusCondition(&next.Status.Conditions, cond)
	}
	if wl.Status.Admission != nil {
		next.Status.Admission = wl.Status.Admission.DeepCopy()
	}
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) &&
		!apimeta.IsStatusConditionTrue(cur.Status.Conditions, kueue.WorkloadQuotaReserved) {
		c.admitted = append(c.admitted, key)
	}
	if ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == "True" &&
		!apimeta.IsStatusConditionTrue(cur.Status.Conditions, kueue.WorkloadEvicted) {
		e := eviction{key: key, reason: ev.Reason, message: ev.Message}
		if p := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); p != nil {
			e.preemptedReason, e.message = p.Reason, p.Message
		}
		c.evicted = append(c.evicted, e)
	}
	c.workloads[key] = next
	return nil
}

// pendingMessage is Kueue's last word on why a Workload of the copy waits.
func (c *copyClient) pendingMessage(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wl := c.workloads[key]; wl != nil {
		if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); cond != nil && cond.Status == "False" {
			return cond.Message
		}
	}
	return ""
}

// takeAdmissions returns the Workloads admitted since the last call.
func (c *copyClient) takeAdmissions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.admitted
	c.admitted = nil
	return out
}

// takeEvictions returns the evictions since the last call.
func (c *copyClient) takeEvictions() []eviction {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.evicted
	c.evicted = nil
	return out
}

type statusWriter struct{ c *copyClient }

func (w statusWriter) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return errWriteInPreview
}
func (w statusWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errWriteInPreview
}
func (w statusWriter) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return w.c.take(obj)
}
func (w statusWriter) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	return w.c.take(obj)
}
func (w statusWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errWriteInPreview
}
