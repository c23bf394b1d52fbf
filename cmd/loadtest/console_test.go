package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestCPUTicksCountsFromTheLastParenthesis(t *testing.T) {
	// Field 2 is the command in parentheses and may itself hold spaces and ')'.
	stat := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 12 0 100 0 0"
	got, err := cpuTicks(stat)
	if err != nil || got != 1234+567 {
		t.Errorf("cpuTicks = %d, %v; want %d", got, err, 1234+567)
	}
	if _, err := cpuTicks("4242 (short) S 1"); err == nil {
		t.Error("short line: want an error")
	}
}

func TestReadProcOfThisProcess(t *testing.T) {
	s := readProc(strconv.Itoa(os.Getpid()))
	if !s.Available || s.RSSBytes <= 0 || s.HWMBytes < s.RSSBytes {
		t.Errorf("readProc(self) = %+v; want CPU ticks, RSS > 0 and VmHWM ≥ VmRSS", s)
	}
	if gone := readProc("0"); gone.Available {
		t.Errorf("readProc of no process = %+v; want unavailable", gone)
	}
	a := procSample{At: time.Unix(0, 0), CPUTicks: 100, Available: true}
	b := procSample{At: time.Unix(10, 0), CPUTicks: 350, Available: true}
	if got := cpuPercent(a, b); got != 25 {
		t.Errorf("cpuPercent = %v; want 25 (2.5 s of CPU in 10 s)", got)
	}
}

func TestRequireLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, "127.0.0.1": true, "127.1.2.3:0": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		if err := requireLoopback(addr); (err == nil) != ok {
			t.Errorf("requireLoopback(%q) = %v; want allowed=%v", addr, err, ok)
		}
	}
}

func TestOptionsAreBounded(t *testing.T) {
	if _, err := parseOptions(nil); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, args := range [][]string{
		{"--rate", "0"}, {"--rate", "500"}, {"--watchers", "5000"}, {"--tasks-watchers", "200"},
		{"--clients", "0"}, {"--workloads", "1000000"}, {"--duration", "2h"}, {"--listen", ":8080"},
		{"--skip", "everything"}, {"--max-run", "0s"},
	} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("parseOptions(%q): want an error", args)
		}
	}
	o, err := parseOptions([]string{"--skip", "kubectl, csv", "--workloads", "2000"})
	if err != nil || !o.skip["kubectl"] || !o.skip["csv"] || o.skip["pages"] || o.workloads != 2000 {
		t.Errorf("parseOptions = %+v, %v", o, err)
	}
}

// The sandbox's processes are read from the pid files beside its
// kubeconfig, and their CPU time adds up; a process gone counts nothing,
// also when it went between two samples.
func TestSandboxCPU(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	for name, line := range map[string]string{"kueue": self + " /bin/kueue\n", "etcd": "0 /bin/etcd\n", "empty": ""} {
		if err := os.WriteFile(filepath.Join(dir, "pids", name), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pids := sandboxPIDs(filepath.Join(dir, "kubeconfig"))
	slices.Sort(pids)
	if want := []string{"0", self}; !slices.Equal(pids, want) {
		t.Fatalf("sandboxPIDs = %v, want %v", pids, want)
	}
	before := readProc(self).CPUTicks
	got := ticksOf(pids)
	after := readProc(self).CPUTicks
	if len(got) != 1 || got[self] < before || got[self] > after || after == 0 {
		t.Errorf("ticksOf = %v, want this process's (%d to %d), and nothing for pid 0", got, before, after)
	}
	from := map[string]int64{self: 100, "gone": 5000}
	to := map[string]int64{self: 150, "come": 7000}
	if n := ticksBetween(from, to); n != 50 {
		t.Errorf("ticksBetween = %d, want 50: only the process in both samples", n)
	}
	if got := sandboxPIDs(filepath.Join(t.TempDir(), "kubeconfig")); len(got) != 0 {
		t.Errorf("a sandbox without pid files has processes %v", got)
	}
}
