package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// console is the console process under test.
type console struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	Base   string // http://127.0.0.1:port
	PID    int
}

// startConsole runs bin/console on the sandbox, listening on addr (a
// loopback address; port 0 picks a free one), logging to logPath, and waits
// until /readyz answers 200.
func startConsole(ctx context.Context, bin, kubeconfig, prometheusURL, addr, logPath string, ready time.Duration) (*console, error) {
	if err := requireLoopback(addr); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if strings.HasSuffix(addr, ":0") {
		free, err := freeLoopbackAddr(strings.TrimSuffix(addr, ":0"))
		if err != nil {
			return nil, err
		}
		addr = free
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", kubeconfig, "--listen", addr}
	if prometheusURL != "" {
		args = append(args, "--prometheus-url", prometheusURL)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &console{cmd: cmd, exited: make(chan struct{}), Base: "http://" + addr, PID: cmd.Process.Pid}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	if err := c.waitReady(ctx, ready); err != nil {
		c.Stop()
		return nil, fmt.Errorf("console (log: %s): %w", logPath, err)
	}
	return c, nil
}

func (c *console) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/readyz", nil)
		if res, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", res.StatusCode, bytes.TrimSpace(body))
		}
		select {
		case <-c.exited:
			return fmt.Errorf("exited before it was ready: %v", c.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s (/readyz: %s)", limit, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Stop ends the console: SIGTERM, then SIGKILL after 10 s.
func (c *console) Stop() {
	if c == nil {
		return
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// Running reports whether the console is still up.
func (c *console) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func freeLoopbackAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// requireLoopback refuses any address that is not on this machine's
// loopback: the tool sends thousands of requests and creates Workloads.
func requireLoopback(hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address (127.0.0.1, ::1 or localhost): the load test runs on loopback only", hostport)
}

// procSample is a process's memory and CPU time at one moment.
type procSample struct {
	At        time.Time
	RSSBytes  int64 // VmRSS
	HWMBytes  int64 // VmHWM: peak RSS since start
	CPUTicks  int64 // utime + stime, in clock ticks
	Available bool
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
