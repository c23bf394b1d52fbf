package sandbox

import (
	"context"
	"io"

	"k8s.io/client-go/kubernetes"
)

func runDemoLoad(ctx context.Context, kube kubernetes.Interface, log io.Writer) error {
	<-ctx.Done()
	return nil
}
