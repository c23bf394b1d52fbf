package sandbox

import (
	"context"
	"fmt"
	"os"
	"time"
)

// startPrometheus scrapes Kueue's metrics (HTTPS, bearer token authorized by the
// apiserver, as in a cluster) and the dcgm-exporter stand-in every 5 s.
func (in *instance) startPrometheus(ctx context.Context, _ pki) error {
	config := fmt.Sprintf(`global:
  scrape_interval: 5s
  evaluation_interval: 5s
scrape_configs:
- job_name: kueue
  scheme: https
  authorization:
    credentials_file: %s
  tls_config:
    insecure_skip_verify: true
  static_configs:
  - targets: ['%s']
- job_name: dcgm-exporter
  honor_labels: true
  static_configs:
  - targets: ['%s']
`, in.path("admin.token"), in.addr(portKueueMetrics), in.addr(portDCGM))
	if err := os.WriteFile(in.path("prometheus.yml"), []byte(config), 0o644); err != nil {
		return err
	}
	if err := in.launch("prometheus", in.binary("prometheus"), []string{
		"--config.file", in.path("prometheus.yml"),
		"--storage.tsdb.path", in.path("prometheus"),
		"--storage.tsdb.retention.time", "8d",
		"--web.listen-address", in.addr(portPrometheus),
		"--log.level", "warn",
	}); err != nil {
		return err
	}
	return in.waitFor(ctx, "prometheus", 60*time.Second, func(ctx context.Context) error {
		return in.get(ctx, in.env().PrometheusURL+"/-/ready")
	})
}
