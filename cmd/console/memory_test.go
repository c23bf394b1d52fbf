package main

import (
	"strings"
	"testing"
)

func TestMemoryLimitFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    int
		wantErr string
	}{
		{args: nil, want: 208},
		{args: []string{"--memory-limit-mib", "0"}, want: 0},
		{args: []string{"--memory-limit-mib", "512"}, want: 512},
		{args: []string{"--memory-limit-mib", "-1"}, wantErr: "--memory-limit-mib must be 0 or more"},
	} {
		o, err := parseFlags(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.memoryLimitMiB != tc.want {
			t.Errorf("%q: memory limit %d MiB, want %d", tc.args, o.memoryLimitMiB, tc.want)
		}
	}
}
