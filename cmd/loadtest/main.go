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
//  5. times the impact preview of a team's quota cut, as an admin asks for
//     it on the team form;
//  6. holds watchers that follow the live updates as web/static/app.js does
//     (either protocol: `snapshot` events and refetch, or pushed `fragments`)
//     while probe Workloads are created, and times how long each takes to
//     reach each page that must show it;
//
// then prints one table and writes it to bin/loadtest.json and .md.
//
// It talks to the console's binary and to the cluster, never to an in-process
// console: it must not import the console's web side (internal/app,
// internal/handlers, web), its write path, task history or sign-in.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openquota/console/internal/loopback"
	"k8s.io/apimachinery/pkg/util/rand"
)

type options struct {
	sandboxBin, loadgenBin, consoleBin, kubectl string
	instance, namespacePrefix, listen, out      string
	teams, workloads                            int
	clients, watchers, tasksWatchers            int
	probeTeams, previews                        int
	rate                                        float64
	pageDuration, createFor, seeTimeout         time.Duration
	idle, churn, settle, ready, maxRun          time.Duration
	skip                                        map[string]bool
	keepProbes                                  bool
	// profile names pages whose CPU profile is taken while their clients run.
	profile map[string]bool
}

// phases that --skip can leave out.
var phases = []string{"cpu", "kubectl", "pages", "csv", "preview", "watch"}

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
	fs.IntVar(&o.previews, "previews", 40, "impact previews the preview phase asks for, one after the other")
	fs.IntVar(&o.probeTeams, "probe-teams", 8, "teams the probe Workloads go to, and the team pages watchers watch")
	fs.Float64Var(&o.rate, "rate", 5, "probe Workloads created per second")
	fs.DurationVar(&o.createFor, "create-for", 60*time.Second, "how long probes are created while the watchers watch")
	fs.DurationVar(&o.seeTimeout, "see-timeout", time.Minute, "a watcher that has not shown a probe this long after its creation never saw it")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "CPU sample with no client connected")
	fs.DurationVar(&o.churn, "churn", 30*time.Second, "CPU sample while probes are created (no client)")
	// The console backfills its task history from every Workload when it
	// starts (about a minute at 50 000): idle is measured after.
	fs.DurationVar(&o.settle, "settle", 90*time.Second, "wait after the console is ready before measuring (its task history's backfill)")
	fs.DurationVar(&o.ready, "ready-timeout", 5*time.Minute, "how long the console may take to be ready")
	fs.DurationVar(&o.maxRun, "max-run", time.Hour, "the whole run, fill included, ends after this")
	skip := fs.String("skip", "", "phases to leave out, comma-separated: "+strings.Join(phases, ","))
	fs.BoolVar(&o.keepProbes, "keep-probes", false, "leave the probe Workloads and their priority class in the sandbox")
	profile := fs.String("profile", "", "pages (as in the table, comma-separated; \"watch\" for the live phase) whose console CPU profile is written to <out>-<page>.pprof while their clients run")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.profile = map[string]bool{}
	for _, p := range strings.Split(*profile, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.profile[p] = true
		}
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
	loopback.Main("loadtest", parseOptions, func(ctx context.Context, o options) error {
		ctx, cancel := context.WithTimeout(ctx, o.maxRun)
		defer cancel()
		return run(ctx, o)
	})
}

// runner is one run: the options, what the phases share, and the result.
type runner struct {
	o          options
	res        *result
	env        sandboxEnv
	cl         *cluster
	teams      []teamQueue
	probeTeams []teamQueue // where probes go; the team pages the watchers watch
	con        *console
	pid        string
	client     *http.Client
	pr         *prober
	// profileBase is where the console serves its profiles ("" when none is
	// asked for).
	profileBase string
}

func run(ctx context.Context, o options) (err error) {
	r := &runner{o: o, res: &result{Command: loopback.CommandLine("loadtest"), Commit: loopback.GitCommit(), Started: time.Now().UTC(),
		CPUs: runtime.NumCPU(), LoadAverage: map[string]string{}}}
	for _, b := range []string{o.sandboxBin, o.consoleBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: build it first (make loadtest does)", b)
		}
	}
	if err := r.prepareSandbox(ctx); err != nil {
		return err
	}
	if err := r.cl.ensureProbeClass(ctx); err != nil {
		return err
	}
	defer r.cleanUp()

	logPath := o.out + "-console.log"
	log.Printf("starting %s (log: %s)", o.consoleBin, logPath)
	start := time.Now()
	profileAddr := ""
	if len(o.profile) > 0 {
		if profileAddr, err = freeLoopback(); err != nil {
			return err
		}
		r.profileBase = "http://" + profileAddr
	}
	r.con, err = startConsole(ctx, o.consoleBin, r.env.Kubeconfig, r.env.PrometheusURL, o.listen, profileAddr, logPath, o.ready)
	if err != nil {
		return err
	}
	defer r.con.Stop()
	r.res.ReadySeconds = time.Since(start).Seconds()
	r.pid = strconv.Itoa(r.con.PID)
	defer func() {
		if err != nil { // keep what was measured before the run stopped
			r.res.RSSPeakMiB = mib(readProc(r.pid).HWMBytes)
			r.res.Notes = append(r.res.Notes, "the run stopped early: "+err.Error())
			_ = r.res.write(o.out, os.Stdout)
		}
	}()
	log.Printf("console %s (pid %s) ready in %.1fs; settling %s", r.con.Base, r.pid, r.res.ReadySeconds, o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}
	r.client = &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 90 * time.Second}}
	defer r.client.CloseIdleConnections()
	r.pr = &prober{c: r.cl, runID: strings.ToLower(rand.String(5))}
	r.res.RSSReadyMiB = mib(readProc(r.pid).RSSBytes)

	for _, phase := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"cpu", r.measureCPU}, {"kubectl", r.measureKubectlWay}, {"pages", r.measurePages},
		{"csv", r.measureCSV}, {"preview", r.measurePreviews}, {"watch", r.measureWatchers},
	} {
		if o.skip[phase.name] {
			continue
		}
		if err := phase.run(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if phase.name != "cpu" { // it notes idle and churn itself
			r.res.LoadAverage[phase.name] = loadAverage()
		}
	}

	r.res.RSSPeakMiB = mib(readProc(r.pid).HWMBytes)
	if !r.con.Running() {
		r.res.Notes = append(r.res.Notes, "the console exited during the run; see "+logPath)
	}
	r.res.Finished = time.Now().UTC()
	r.con.Stop()
	return r.res.write(o.out, os.Stdout)
}

// prepareSandbox starts the sandbox, removes probes an interrupted run
// left, fills it up to --workloads and finds its teams.
func (r *runner) prepareSandbox(ctx context.Context) error {
	o := r.o
	log.Printf("sandbox %q: starting or reusing", o.instance)
	var err error
	if r.env, err = sandboxUp(ctx, o.sandboxBin, o.instance); err != nil {
		return err
	}
	if r.cl, err = newCluster(r.env.Kubeconfig, o.namespacePrefix); err != nil {
		return err
	}
	if n, err := r.cl.deleteProbes(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Printf("deleted %d probe Workloads an earlier run left", n)
	}
	have, err := r.cl.countWorkloads(ctx)
	if err != nil {
		return err
	}
	if have < o.workloads {
		if _, err := os.Stat(o.loadgenBin); err != nil {
			return fmt.Errorf("%s is missing: build it first (make loadtest does)", o.loadgenBin)
		}
		log.Printf("sandbox holds %d Workloads; filling to %d (%d teams)", have, o.workloads, o.teams)
		start := time.Now()
		if err := fill(ctx, o.loadgenBin, r.env.Kubeconfig, o.teams, o.workloads); err != nil {
			return err
		}
		r.res.FillSeconds = time.Since(start).Seconds()
		if have, err = r.cl.countWorkloads(ctx); err != nil {
			return err
		}
	} else {
		log.Printf("reusing the sandbox's %d Workloads (--workloads %d: a sandbox holding more is measured as it is)", have, o.workloads)
	}
	r.res.Workloads = have
	if r.teams, err = r.cl.teams(ctx); err != nil {
		return err
	}
	if len(r.teams) == 0 {
		return fmt.Errorf("no team namespaces (prefix %q) with a LocalQueue in the sandbox", o.namespacePrefix)
	}
	r.res.Teams = len(r.teams)
	r.probeTeams = spread(r.teams, o.probeTeams)
	return nil
}

// cleanUp leaves the sandbox as the fill made it: no probes, no probe class.
func (r *runner) cleanUp() {
	if r.o.keepProbes {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if n, err := r.cl.deleteProbes(ctx); err != nil {
		log.Printf("cleaning up: %v", err)
	} else {
		log.Printf("deleted %d probe Workloads", n)
	}
	if err := r.cl.deleteProbeClass(ctx); err != nil {
		log.Printf("cleaning up: %v", err)
	}
}

// measureCPU samples the console's CPU with no client, first while only
// Kueue churns, then while probes are created too.
func (r *runner) measureCPU(ctx context.Context) error {
	log.Printf("CPU with no client for %s", r.o.idle)
	a := readProc(r.pid)
	if err := sleep(ctx, r.o.idle); err != nil {
		return err
	}
	b := readProc(r.pid)
	r.res.CPUIdlePercent, r.res.RSSIdleMiB = ptr(cpuPercent(a, b)), mib(b.RSSBytes)
	r.res.LoadAverage["idle"] = loadAverage()

	log.Printf("CPU while creating %.0f Workloads/s for %s, no client", r.o.rate, r.o.churn)
	a = readProc(r.pid)
	r.pr.run(ctx, r.probeTeams, r.o.rate, r.o.churn)
	b = readProc(r.pid)
	r.res.CPUChurnPercent, r.res.RSSChurnMiB = ptr(cpuPercent(a, b)), mib(b.RSSBytes)
	r.res.LoadAverage["churn"] = loadAverage()
	return nil
}

// measureKubectlWay times the manual way; without kubectl the run goes on
// and says so.
func (r *runner) measureKubectlWay(ctx context.Context) error {
	log.Printf("the kubectl way: %s get workloads -A -o json + the per-class table", r.o.kubectl)
	k, err := runKubectlWay(ctx, r.o.kubectl, r.env.Kubeconfig)
	if err != nil {
		r.res.Notes = append(r.res.Notes, "kubectl way: "+err.Error())
		log.Print(err)
		return nil
	}
	r.res.Kubectl = &k
	log.Printf("kubectl way: %.1fs (kubectl %.1fs, %d MB, %d Workloads)", k.Seconds, k.KubectlSeconds, k.Bytes>>20, k.Workloads)
	return nil
}

// measurePages drives the concurrent clients against each page in turn,
// reading the console's histogram before and after each.
func (r *runner) measurePages(ctx context.Context) error {
	for _, p := range pagesUnderLoad {
		if err := ctx.Err(); err != nil {
			return err
		}
		before, err := scrape(ctx, r.client, r.con.Base)
		if err != nil {
			return err
		}
		stopProfile := r.profilePage(ctx, p.Path)
		sandbox := sandboxPIDs(r.env.Kubeconfig)
		consoleFrom, sandboxFrom, from := readProc(r.pid), ticksOf(sandbox), time.Now()
		pr := drivePage(ctx, r.client, r.con.Base, p, r.teams, r.o.clients, r.o.pageDuration)
		consoleTo, sandboxTo, took := readProc(r.pid), ticksOf(sandbox), time.Since(from).Seconds()
		stopProfile()
		if consoleFrom.Available && consoleTo.Available {
			pr.ConsoleCores = float64(consoleTo.CPUTicks-consoleFrom.CPUTicks) / clockTicks / took
		}
		pr.SandboxCores = float64(ticksBetween(sandboxFrom, sandboxTo)) / clockTicks / took
		after, err := scrape(ctx, r.client, r.con.Base)
		if err != nil {
			return err
		}
		pr.Server = serverTimeOf(after.since(before).pagesOnly())
		if r.res.Kubectl != nil && pr.P50Seconds > 0 {
			pr.KubectlRatio = r.res.Kubectl.Seconds / pr.P50Seconds
		}
		log.Printf("%-36s p50 %-9s p99 %-9s %7.1f req/s  server p99 %s  (%d requests, %d failed; CPU: console %.2f, sandbox %.2f cores)",
			p.Path, fmtSeconds(pr.P50Seconds), fmtSeconds(pr.P99Seconds), pr.ReqPerSec, fmtServerP99(pr.Server), pr.Requests, pr.Failed,
			pr.ConsoleCores, pr.SandboxCores)
		r.res.Pages = append(r.res.Pages, pr)
	}
	return nil
}

// measureCSV downloads the full task CSV once.
func (r *runner) measureCSV(ctx context.Context) error {
	before, _ := scrape(ctx, r.client, r.con.Base)
	c, err := downloadCSV(ctx, r.client, r.con.Base, r.pid)
	if err != nil {
		r.res.Notes = append(r.res.Notes, "full task CSV: "+err.Error())
		log.Print(err)
		return nil
	}
	if after, err := scrape(ctx, r.client, r.con.Base); err == nil {
		if m := after.since(before).pagesOnly().merged(); m != nil {
			c.ServerSeconds = m.Sum
		}
	}
	r.res.CSV = &c
	log.Printf("full task CSV: %d rows in %.2fs (%.0f rows/s), RSS +%.0f MiB", c.Rows, c.Seconds, c.RowsPerSec, c.RSSGrowthMiB)
	return nil
}

// measureWatchers runs the live-update phase.
func (r *runner) measureWatchers(ctx context.Context) error {
	if r.o.watchers == 0 {
		return nil
	}
	// While the probes are created: the watchers connect first.
	stopProfile := r.profileAfter(ctx, "watch", 15*time.Second, max(1, int(r.o.createFor/time.Second)-20))
	w, err := runWatchers(ctx, r.o, r.client, r.con, r.pr, r.probeTeams)
	stopProfile()
	if err != nil {
		return err
	}
	r.res.Watch = w
	r.res.RSSWatchersMiB = w.RSSWithWatchersMiB
	return nil
}

// runWatchers holds the watchers open while probes are created, then
// collects when each page showed each probe.
func runWatchers(ctx context.Context, o options, client *http.Client, con *console, pr *prober, probeTeams []teamQueue) (*watchResult, error) {
	names := make([]string, len(probeTeams))
	for i, t := range probeTeams {
		names[i] = t.Name
	}
	ws := planWatchers(o.watchers, o.tasksWatchers, names, pr.c.probeClass)
	before, err := scrape(ctx, client, con.Base)
	if err != nil {
		return nil, err
	}
	liveBefore, err := scrapeLiveTimes(ctx, client, con.Base)
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
	liveAfter, err := scrapeLiveTimes(ctx, client, con.Base)
	if err != nil {
		return nil, err
	}
	wr := summarizeWatchers(ws, probes, o.seeTimeout)
	wr.Snapshots, wr.Renders = stageOf(liveBefore.snapshot, liveAfter.snapshot), stageOf(liveBefore.render, liveAfter.render)
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
	wr.CreateP50Seconds, wr.CreateP95Seconds = percentile(took, 0.5).Seconds(), percentile(took, 0.95).Seconds()
	if wr.CreateSeconds > 0 {
		wr.CreatedPerSec = float64(len(probes)) / wr.CreateSeconds
	}
	return wr, nil
}

// spread picks n teams evenly from the list.
func spread(teams []teamQueue, n int) []teamQueue {
	n = min(n, len(teams))
	out := make([]teamQueue, n)
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
