package main

import (
	"strings"
	"testing"
)

// The figures of the cluster are served on an address of their own, off
// unless given, and never on --listen.
func TestMetricsListenFlag(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.metricsListen != "" {
		t.Errorf("default --metrics-listen %q (%v), want off", o.metricsListen, err)
	}
	if o, err := parseFlags([]string{"--listen", "127.0.0.1:8080", "--metrics-listen", ":8081"}); err != nil || o.metricsListen != ":8081" {
		t.Errorf("--metrics-listen :8081: %q, %v", o.metricsListen, err)
	}
	_, err = parseFlags([]string{"--listen", "127.0.0.1:8080", "--metrics-listen", "127.0.0.1:8080"})
	if err == nil || !strings.Contains(err.Error(), "--metrics-listen must differ from --listen") {
		t.Errorf("the pages' address accepted: %v", err)
	}
}
