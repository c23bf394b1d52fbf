// Command loadtest measures the console at the size it is designed for, in
// one bounded run on loopback (make loadtest):
//
//  1. starts, and fills or reuses, the "load" sandbox (cmd/loadgen: 200 teams,
//     50 000 Workloads; --workloads for a smaller fill);
//  2. starts bin/console on it and measures its CPU with no client while
//     Kueue churns, and while Workloads are created;
//  3. times the manual way: kubectl get workloads -A -o json plus the
//     per-priority-class table;
//  4. drives concurrent clients against every page and CSV (client p50/p99,
//     req/s, and server p99 from the console's own histogram), and downloads
//     the full task CSV once;
//  5. holds watchers that follow the live updates as web/static/app.js does
//     (either protocol: `snapshot` events and refetch, or pushed `fragments`)
//     while probe Workloads are created, and times how long each takes to
//     reach each page that must show it;
//
// then prints one table and writes it to bin/loadtest.json and .md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
)

type options struct {
	sandboxBin, loadgenBin, consoleBin, kubectl string
	instance, namespacePrefix, listen, out      string
	teams, workloads                            int
	clients, watchers, tasksWatchers            int
	probeTeams                                  int
	rate                                        float64
	pageDuration, createFor, seeTimeout         time.Duration
	idle, churn, settle, ready, maxRun          time.Duration
	skip                                        map[string]bool
	keepProbes                                  bool
}

// phases that --skip can leave out.
var phases = []string{"cpu", "kubectl", "pages", "csv", "watch"}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.StringVar(&o.sandboxBin, "sandbox-bin", "bin/sandbox", "the sandbox command")
	fs.StringVar(&o.loadgenBin, "loadgen-bin", "bin/loadgen", "the load generator")
	fs.StringVar(&o.consoleBin, "console-bin", "bin/console", "the console to measure")
	fs.StringVar(&o.kubectl, "kubectl", "/usr/bin/kubectl", "kubectl, for the manual way")
	fs.StringVar(&o.instance, "instance", "load", "sandbox instance to fill and measure")
	fs.StringVar(&o.namespacePrefix, "namespace-prefix", "hyperpod-ns-", "prefix of team namespaces (as the console's --namespace-prefix)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "loopback address for the console (port 0: a free one)")
	fs.StringVar(&o.out, "out", "bin/loadtest", "results go to <out>.json and <out>.md")
	fs.IntVar(&o.teams, "teams", 200, "teams to fill the sandbox with")
	fs.IntVar(&o.workloads, "workloads", 50_000, "Workloads the sandbox must hold: filled up to this many, reused when it has them")
	fs.IntVar(&o.clients, "clients", 32, "concurrent clients per page")
	fs.DurationVar(&o.pageDuration, "duration", 15*time.Second, "how long the clients request each page")
	fs.IntVar(&o.watchers, "watchers", 100, "live-update watchers")
	fs.IntVar(&o.tasksWatchers, "tasks-watchers", 32, "of the watchers, those on the full Tasks page")
	fs.IntVar(&o.probeTeams, "probe-teams", 8, "teams the probe Workloads go to, and the team pages watchers watch")
	fs.Float64Var(&o.rate, "rate", 5, "probe Workloads created per second")
	fs.DurationVar(&o.createFor, "create-for", 60*time.Second, "how long probes are created while the watchers watch")
	fs.DurationVar(&o.seeTimeout, "see-timeout", 30*time.Second, "a watcher that has not shown a probe this long after its creation never saw it")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "CPU sample with no client connected")
	fs.DurationVar(&o.churn, "churn", 30*time.Second, "CPU sample while probes are created (no client)")
	fs.DurationVar(&o.settle, "settle", 15*time.Second, "wait after the console is ready before measuring")
	fs.DurationVar(&o.ready, "ready-timeout", 5*time.Minute, "how long the console may take to be ready")
	fs.DurationVar(&o.maxRun, "max-run", time.Hour, "the whole run, fill included, ends after this")
	skip := fs.String("skip", "", "phases to leave out, comma-separated: "+strings.Join(phases, ","))
	fs.BoolVar(&o.keepProbes, "keep-probes", false, "leave the probe Workloads and their priority class in the sandbox")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.skip = map[string]bool{}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		known := false
		for _, p := range phases {
			known = known || p == s
		}
		if !known {
			return o, fmt.Errorf("--skip: unknown phase %q (phases: %s)", s, strings.Join(phases, ","))
		}
		o.skip[s] = true
	}
	return o, o.validate()
}

// validate keeps every run bounded in time and count.
func (o options) validate() error {
	var errs []error
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	check(o.teams >= 1 && o.teams <= 1000, "--teams must be 1 to 1000")
	check(o.workloads >= 0 && o.workloads <= 100_000, "--workloads must be 0 to 100 000")
	check(o.clients >= 1 && o.clients <= 256, "--clients must be 1 to 256")
	check(o.watchers >= 0 && o.watchers <= 1000, "--watchers must be 0 to 1000")
	check(o.tasksWatchers >= 0 && o.tasksWatchers <= o.watchers, "--tasks-watchers must be 0 to --watchers")
	check(o.probeTeams >= 1 && o.probeTeams <= 1000, "--probe-teams must be 1 to 1000")
	check(o.rate > 0 && o.rate <= 50, "--rate must be above 0 and at most 50 per second")
	for name, d := range map[string]time.Duration{"--duration": o.pageDuration, "--create-for": o.createFor,
		"--see-timeout": o.seeTimeout, "--idle": o.idle, "--churn": o.churn, "--settle": o.settle} {
		check(d >= 0 && d <= 10*time.Minute, "%s must be 0 to 10m", name)
	}
	check(o.pageDuration > 0 && o.createFor > 0 && o.seeTimeout > 0, "--duration, --create-for and --see-timeout must be above 0")
	check(o.maxRun > 0 && o.maxRun <= 3*time.Hour, "--max-run must be above 0 and at most 3h")
	check(requireLoopback(o.listen) == nil, "--listen %q is not a loopback address", o.listen)
	return errors.Join(errs...)
}

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("loadtest: ")
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		log.Print(err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxRun)
	defer cancel()
	if err := run(ctx, o); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	res := &result{Command: commandLine(), Commit: gitCommit(), Started: time.Now().UTC(), CPUs: runtime.NumCPU()}
	for _, b := range []string{o.sandboxBin, o.consoleBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: build it first (make loadtest does)", b)
		}
	}

	log.Printf("sandbox %q: starting or reusing", o.instance)
	env, err := sandboxUp(ctx, o.sandboxBin, o.instance)
	if err != nil {
		return err
	}
	cl, err := newCluster(env.Kubeconfig, o.namespacePrefix)
	if err != nil {
		return err
	}
	if n, err := cl.deleteProbes(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Printf("deleted %d probe Workloads an earlier run left", n)
	}
	have, err := cl.countWorkloads(ctx)
	if err != nil {
		return err
	}
	if have < o.workloads {
		if _, err := os.Stat(o.loadgenBin); err != nil {
			return fmt.Errorf("%s is missing: build it first (make loadtest does)", o.loadgenBin)
		}
		log.Printf("sandbox holds %d Workloads; filling to %d (%d teams)", have, o.workloads, o.teams)
		start := time.Now()
		if err := fill(ctx, o.loadgenBin, env.Kubeconfig, o.teams, o.workloads); err != nil {
			return err
		}
		res.FillSeconds = time.Since(start).Seconds()
		if have, err = cl.countWorkloads(ctx); err != nil {
			return err
		}
	} else {
		log.Printf("reusing the sandbox's %d Workloads (--workloads %d: a sandbox holding more is measured as it is)", have, o.workloads)
	}
	res.Workloads = have
	teams, err := cl.teams(ctx)
	if err != nil {
		return err
	}
	if len(teams) == 0 {
		return fmt.Errorf("no team namespaces (prefix %q) with a LocalQueue in the sandbox", o.namespacePrefix)
	}
	res.Teams = len(teams)
	probeTeams := spread(teams, o.probeTeams)
	if err := cl.ensureProbeClass(ctx); err != nil {
		return err
	}
	defer func() {
		if o.keepProbes {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if n, err := cl.deleteProbes(cctx); err != nil {
			log.Printf("cleaning up: %v", err)
		} else {
			log.Printf("deleted %d probe Workloads", n)
		}
		if err := cl.deleteProbeClass(cctx); err != nil {
			log.Printf("cleaning up: %v", err)
		}
	}()

	logPath := o.out + "-console.log"
	log.Printf("starting %s (log: %s)", o.consoleBin, logPath)
	start := time.Now()
	con, err := startConsole(ctx, o.consoleBin, env.Kubeconfig, env.PrometheusURL, o.listen, logPath, o.ready)
	if err != nil {
		return err
	}
	defer con.Stop()
	res.ReadySeconds = time.Since(start).Seconds()
	pid := strconv.Itoa(con.PID)
	defer func() {
		if err != nil { // keep what was measured before the run stopped
			res.RSSPeakMiB = mib(readProc(pid).HWMBytes)
			res.Notes = append(res.Notes, "the run stopped early: "+err.Error())
			_ = res.write(o.out, os.Stdout)
		}
	}()
	log.Printf("console %s (pid %s) ready in %.1fs; settling %s", con.Base, pid, res.ReadySeconds, o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 90 * time.Second}}
	defer client.CloseIdleConnections()
	pr := &prober{c: cl, runID: strings.ToLower(rand.String(5))}
	res.LoadAverage = map[string]string{}
	res.RSSReadyMiB = mib(readProc(pid).RSSBytes)

	if !o.skip["cpu"] {
		log.Printf("CPU with no client for %s", o.idle)
		a := readProc(pid)
		if err := sleep(ctx, o.idle); err != nil {
			return err
		}
		b := readProc(pid)
		res.CPUIdlePercent, res.RSSIdleMiB = ptr(cpuPercent(a, b)), mib(b.RSSBytes)
		res.LoadAverage["idle"] = loadAverage()

		log.Printf("CPU while creating %.0f Workloads/s for %s, no client", o.rate, o.churn)
		a = readProc(pid)
		pr.run(ctx, probeTeams, o.rate, o.churn)
		b = readProc(pid)
		res.CPUChurnPercent, res.RSSChurnMiB = ptr(cpuPercent(a, b)), mib(b.RSSBytes)
		res.LoadAverage["churn"] = loadAverage()
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	if !o.skip["kubectl"] {
		log.Printf("the kubectl way: %s get workloads -A -o json + the per-class table", o.kubectl)
		k, err := runKubectlWay(ctx, o.kubectl, env.Kubeconfig)
		if err != nil {
			res.Notes = append(res.Notes, "kubectl way: "+err.Error())
			log.Print(err)
		} else {
			res.Kubectl = &k
			log.Printf("kubectl way: %.1fs (kubectl %.1fs, %d MB, %d Workloads)", k.Seconds, k.KubectlSeconds, k.Bytes>>20, k.Workloads)
		}
		res.LoadAverage["kubectl"] = loadAverage()
	}

	if !o.skip["pages"] {
		for _, p := range pagesUnderLoad {
			if err := ctx.Err(); err != nil {
				return err
			}
			before, err := scrape(ctx, client, con.Base)
			if err != nil {
				return err
			}
			r := drivePage(ctx, client, con.Base, p, teams, o.clients, o.pageDuration)
			after, err := scrape(ctx, client, con.Base)
			if err != nil {
				return err
			}
			r.Server = serverTimeOf(after.since(before).pagesOnly())
			if res.Kubectl != nil && r.P50Seconds > 0 {
				r.KubectlRatio = res.Kubectl.Seconds / r.P50Seconds
			}
			log.Printf("%-36s p50 %-9s p99 %-9s %7.1f req/s  server p99 %s  (%d requests, %d failed)",
				p.Path, fmtSeconds(r.P50Seconds), fmtSeconds(r.P99Seconds), r.ReqPerSec, fmtServerP99(r.Server), r.Requests, r.Failed)
			res.Pages = append(res.Pages, r)
		}
		res.LoadAverage["pages"] = loadAverage()
	}

	if !o.skip["csv"] {
		before, _ := scrape(ctx, client, con.Base)
		c, err := downloadCSV(ctx, client, con.Base, pid)
		if err != nil {
			res.Notes = append(res.Notes, "full task CSV: "+err.Error())
			log.Print(err)
		} else {
			if after, err := scrape(ctx, client, con.Base); err == nil {
				if m := after.since(before).pagesOnly().merged(); m != nil {
					c.ServerSeconds = m.Sum
				}
			}
			res.CSV = &c
			log.Printf("full task CSV: %d rows in %.2fs (%.0f rows/s), RSS +%.0f MiB", c.Rows, c.Seconds, c.RowsPerSec, c.RSSGrowthMiB)
		}
	}

	if !o.skip["watch"] && o.watchers > 0 {
		w, err := runWatchers(ctx, o, client, con, pr, probeTeams)
		if err != nil {
			return err
		}
		res.Watch = w
		res.RSSWatchersMiB = w.RSSWithWatchersMiB
		res.LoadAverage["watch"] = loadAverage()
	}

	end := readProc(pid)
	res.RSSPeakMiB = mib(end.HWMBytes)
	if !con.Running() {
		res.Notes = append(res.Notes, "the console exited during the run; see "+logPath)
	}
	res.Finished = time.Now().UTC()
	con.Stop()
	return res.write(o.out, os.Stdout)
}

// runWatchers holds the watchers open while probes are created, then
// collects when each page showed each probe.
func runWatchers(ctx context.Context, o options, client *http.Client, con *console, pr *prober, probeTeams []team) (*watchResult, error) {
	names := make([]string, len(probeTeams))
	for i, t := range probeTeams {
		names[i] = t.Name
	}
	ws := planWatchers(o.watchers, o.tasksWatchers, names, pr.c.probeClass)
	before, err := scrape(ctx, client, con.Base)
	if err != nil {
		return nil, err
	}
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	var ready, done sync.WaitGroup
	log.Printf("connecting %d watchers", len(ws))
	connectStart := time.Now()
	for _, w := range ws {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			w.run(wctx, client, con.Base, ready.Done)
		}()
	}
	if !waitGroupTimeout(ctx, &ready, 5*time.Minute) {
		log.Printf("not every watcher connected within 5 minutes; creating anyway")
	}
	connected := time.Since(connectStart)
	pid := strconv.Itoa(con.PID)
	log.Printf("watchers connected in %.1fs; creating %.0f Workloads/s for %s", connected.Seconds(), o.rate, o.createFor)
	rss := watchRSS(pid, 250*time.Millisecond)
	a, self0 := readProc(pid), readProc("self")
	probes := pr.run(ctx, probeTeams, o.rate, o.createFor)
	b, self1 := readProc(pid), readProc("self")
	log.Printf("%d probes created; waiting up to %s for every page to show them", len(probes), o.seeTimeout)
	waitAllSeen(ctx, ws, probes, o.seeTimeout)
	peak := rss.Stop()
	stopWatchers()
	done.Wait()
	after, err := scrape(ctx, client, con.Base)
	if err != nil {
		return nil, err
	}
	wr := summarizeWatchers(ws, probes, o.seeTimeout)
	wr.ConnectSeconds = connected.Seconds()
	wr.CreateSeconds = b.At.Sub(a.At).Seconds()
	wr.CPUPercent = cpuPercent(a, b)
	wr.ToolCPUPercent = cpuPercent(self0, self1)
	wr.RSSWithWatchersMiB = mib(b.RSSBytes)
	wr.RSSPeakMiB = mib(peak)
	wr.ServerPages = serverTimeOf(after.since(before).pagesOnly())
	failed, firstErr := pr.failures()
	wr.ProbeCreateFailures = failed
	if firstErr != nil {
		wr.ProbeCreateError = firstErr.Error()
	}
	var took []time.Duration
	for _, p := range probes {
		took = append(took, p.Took)
	}
	wr.CreateP50Seconds = percentile(took, 0.5).Seconds()
	if wr.CreateSeconds > 0 {
		wr.CreatedPerSec = float64(len(probes)) / wr.CreateSeconds
	}
	return wr, nil
}

// spread picks n teams evenly from the list.
func spread(teams []team, n int) []team {
	n = min(n, len(teams))
	out := make([]team, n)
	for i := range out {
		out[i] = teams[i*len(teams)/n]
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func waitGroupTimeout(ctx context.Context, wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return false
	}
}

func ptr[T any](v T) *T { return &v }

func commandLine() string {
	return strings.Join(append([]string{"bin/loadtest"}, os.Args[1:]...), " ")
}

// gitCommit names the checkout the console was built from, if it is one.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += "-dirty"
	}
	return commit
}
