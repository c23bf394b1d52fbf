package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openquota/console/internal/loopback"
)

// console is the console process under test.
type console = loopback.Console

// startConsole runs bin/console on the sandbox, listening on addr (a
// loopback address; port 0 picks a free one), logging to logPath, and waits
// until /readyz answers 200.
func startConsole(ctx context.Context, bin, kubeconfig, prometheusURL, addr, profileAddr, logPath string, ready time.Duration) (*console, error) {
	args := []string{"--kubeconfig", kubeconfig}
	if profileAddr != "" {
		args = append(args, "--profile-listen", profileAddr)
	}
	if prometheusURL != "" {
		args = append(args, "--prometheus-url", prometheusURL)
	}
	return loopback.StartConsole(ctx, bin, args, addr, logPath, ready)
}

func requireLoopback(hostport string) error { return loopback.Require(hostport) }

// procSample is a process's memory and CPU time at one moment.
type procSample struct {
	At        time.Time
	RSSBytes  int64 // VmRSS
	HWMBytes  int64 // VmHWM: peak RSS since start
	CPUTicks  int64 // utime + stime, in clock ticks
	Available bool
}

// sandboxPIDs are the processes of the sandbox whose kubeconfig is given:
// the sandbox writes one file per process ("<pid> <path>") in pids/ beside
// it. None when it does not.
func sandboxPIDs(kubeconfig string) []string {
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(kubeconfig), "pids", "*"))
	var pids []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(b)); len(fields) > 0 {
			pids = append(pids, fields[0])
		}
	}
	return pids
}

// ticksOf is the CPU time each process has used, in clock ticks (those
// gone are left out).
func ticksOf(pids []string) map[string]int64 {
	n := map[string]int64{}
	for _, pid := range pids {
		if s := readProc(pid); s.Available {
			n[pid] = s.CPUTicks
		}
	}
	return n
}

// ticksBetween is the CPU time the processes used from one sample to the
// next: a process gone in between (a sandbox process that exited) or come
// counts nothing, rather than its whole life.
func ticksBetween(from, to map[string]int64) int64 {
	var n int64
	for pid, ticks := range to {
		if before, ok := from[pid]; ok {
			n += ticks - before
		}
	}
	return n
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// readProc samples /proc/<pid>/status and /proc/<pid>/stat ("self" for
// this process).
func readProc(pid string) procSample {
	s := procSample{At: time.Now()}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return s
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[0], 10, 64)
		switch key {
		case "VmRSS":
			s.RSSBytes = kb << 10
		case "VmHWM":
			s.HWMBytes = kb << 10
		}
	}
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return s
	}
	ticks, err := cpuTicks(string(stat))
	if err != nil {
		return s
	}
	s.CPUTicks, s.Available = ticks, true
	return s
}

// cpuTicks reads utime + stime (fields 14 and 15) from a /proc/<pid>/stat
// line; the command name (field 2) may contain spaces, so count from the
// last ')'.
func cpuTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' in /proc stat")
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state), so field n is fields[n-3].
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	s, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + s, nil
}

// cpuPercent is the share of one core used between two samples.
func cpuPercent(a, b procSample) float64 {
	wall := b.At.Sub(a.At).Seconds()
	if !a.Available || !b.Available || wall <= 0 {
		return 0
	}
	return float64(b.CPUTicks-a.CPUTicks) / clockTicks / wall * 100
}

// rssWatch samples a process's RSS every interval and keeps the peak.
type rssWatch struct {
	mu   sync.Mutex
	peak int64
	stop chan struct{}
	done chan struct{}
}

func watchRSS(pid string, every time.Duration) *rssWatch {
	w := &rssWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if s := readProc(pid); s.Available {
				w.mu.Lock()
				w.peak = max(w.peak, s.RSSBytes)
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop ends the sampling and returns the peak RSS seen.
func (w *rssWatch) Stop() int64 {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
