package kueue

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/domain"
)

// A console whose account may not list Workloads said "node and revision
// history informers not synced", which sent the admin after the wrong
// thing; it names what it could not read, and the cluster's answer.
func TestReadyNamesWhatTheClusterRefusesToList(t *testing.T) {
	kube := k8sfake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: "kueue.x-k8s.io/v1beta2"}}
	kq := kueuefake.NewClientset()
	kq.PrependReactor("list", "workloads", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}, "",
			errorString("User \"system:serviceaccount:quota-console:quota-console\" cannot list resource \"workloads\""))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := NewCache(kube, kq, domain.DefaultSettings, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.Start(ctx)
	var err error
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		err = c.Ready()
		return err != nil && strings.Contains(err.Error(), "forbidden"), nil
	})
	if err == nil || !strings.Contains(err.Error(), "Workloads") || !strings.Contains(err.Error(), "cannot list resource") ||
		strings.Contains(err.Error(), "Node") || strings.Contains(err.Error(), "ClusterQueues") {
		t.Errorf("Ready: %v, want it to name the Workloads and the cluster's refusal, and nothing it has read", err)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
