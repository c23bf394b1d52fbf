// Command waitcheck measures the console's estimated waits against what
// then happens, on the demo sandbox, in one bounded run (make measure-wait):
//
//  1. starts (or reuses) the demo sandbox and a console on it with a task
//     history in a temporary SQLite file, on a free loopback port;
//  2. keeps tasks waiting: when fewer than --min-waiting wait in a team's
//     ClusterQueue, it submits a demo-like Job to the team's LocalQueue (at
//     most one per team every --submit-every);
//  3. every --every reads the Tasks CSV (queued tasks of every team) and
//     notes each task's estimated wait, while it follows every Workload's
//     admissions;
//  4. stops observing --tail before the end, so that the last observed tasks
//     have time to be admitted, and compares each estimate with the wait that
//     followed (admission − observation);
//
// then prints one summary and writes it to bin/waitcheck.md and .json. It
// deletes its Jobs, stops its console, and stops the sandbox only if it
// started it.
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
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openquota/console/internal/loopback"
	"k8s.io/apimachinery/pkg/util/rand"
)

type options struct {
	sandboxBin, consoleBin, instance, listen, out string
	duration, tail, every, submitEvery, ready     time.Duration
	minWaiting, maxExtra                          int
	keepSandbox                                   bool
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("waitcheck", flag.ContinueOnError)
	fs.StringVar(&o.sandboxBin, "sandbox-bin", "bin/sandbox", "the sandbox command")
	fs.StringVar(&o.consoleBin, "console-bin", "bin/console", "the console whose estimates are measured")
	fs.StringVar(&o.instance, "instance", "demo", "sandbox instance (one that runs the demo teams)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "loopback address for the console (port 0: a free one)")
	fs.StringVar(&o.out, "out", "bin/waitcheck", "results go to <out>.json and <out>.md")
	fs.DurationVar(&o.duration, "duration", 40*time.Minute, "the whole run, from the console's start")
	fs.DurationVar(&o.tail, "tail", 8*time.Minute, "no observations in the last part of the run: it only waits for admissions")
	fs.DurationVar(&o.every, "every", 30*time.Second, "how often the Tasks CSV is read")
	fs.DurationVar(&o.submitEvery, "submit-every", 20*time.Second, "how often each team may get one extra Job")
	fs.IntVar(&o.minWaiting, "min-waiting", 3, "extra Jobs go to a team whose ClusterQueue has fewer tasks waiting (0: none)")
	fs.IntVar(&o.maxExtra, "max-extra", 400, "at most this many extra Jobs in the run")
	fs.DurationVar(&o.ready, "ready-timeout", 5*time.Minute, "how long the console may take to be ready")
	fs.BoolVar(&o.keepSandbox, "keep-sandbox", false, "leave the sandbox running even when this run started it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
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
	check(o.duration > 0 && o.duration <= 4*time.Hour, "--duration must be above 0 and at most 4h")
	check(o.tail >= 0 && o.tail < o.duration, "--tail must be at least 0 and shorter than --duration")
	check(o.every >= 5*time.Second && o.every <= 10*time.Minute, "--every must be 5s to 10m")
	check(o.submitEvery >= time.Second && o.submitEvery <= 10*time.Minute, "--submit-every must be 1s to 10m")
	check(o.minWaiting >= 0 && o.minWaiting <= 50, "--min-waiting must be 0 to 50")
	check(o.maxExtra >= 0 && o.maxExtra <= 5000, "--max-extra must be 0 to 5000")
	check(o.ready > 0 && o.ready <= 30*time.Minute, "--ready-timeout must be above 0 and at most 30m")
	check(requireLoopback(o.listen) == nil, "--listen %q is not a loopback address", o.listen)
	return errors.Join(errs...)
}

func main() { loopback.Main("waitcheck", parseOptions, run) }

func run(ctx context.Context, o options) (err error) {
	for _, b := range []string{o.sandboxBin, o.consoleBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: build it first (make measure-wait does)", b)
		}
	}
	res := &result{Command: loopback.CommandLine("waitcheck"), Commit: loopback.GitCommit(), Started: time.Now().UTC(), Instance: o.instance,
		EverySeconds: o.every.Seconds(), DurationSeconds: o.duration.Seconds(), TailSeconds: o.tail.Seconds()}

	wasRunning := sandboxRunning(ctx, o.sandboxBin, o.instance)
	log.Printf("sandbox %q: %s", o.instance, map[bool]string{true: "running; reusing it", false: "starting it"}[wasRunning])
	env, err := sandboxUp(ctx, o.sandboxBin, o.instance)
	if err != nil {
		return err
	}
	if !wasRunning && !o.keepSandbox {
		defer func() {
			log.Printf("stopping the sandbox %q this run started", o.instance)
			if err := sandboxDown(o.sandboxBin, o.instance); err != nil {
				log.Print(err)
			}
		}()
	}
	cl, err := newCluster(env.Kubeconfig)
	if err != nil {
		return err
	}
	if n, err := cl.deleteExtraJobs(ctx, ""); err != nil {
		return err
	} else if n > 0 {
		log.Printf("deleted %d Jobs an earlier run left", n)
	}

	runID := strings.ToLower(rand.String(5))
	lease := "waitcheck-" + runID
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if n, err := cl.deleteExtraJobs(cctx, runID); err != nil {
			log.Printf("cleaning up: %v", err)
		} else {
			log.Printf("deleted the run's %d remaining extra Jobs", n)
		}
		if err := cl.deleteLease(cctx, lease); err != nil {
			log.Printf("cleaning up: %v", err)
		}
	}()

	adm := newAdmissions()
	actx, stopAdmissions := context.WithCancel(ctx)
	defer stopAdmissions()
	if err := adm.follow(actx, cl.kq); err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "waitcheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logPath := o.out + "-console.log"
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	log.Printf("starting %s with a task history in %s (log: %s)", o.consoleBin, tmp, logPath)
	con, err := startConsole(ctx, o.consoleBin, consoleArgs{kubeconfig: env.Kubeconfig, prometheusURL: env.PrometheusURL,
		listen: o.listen, historyPath: filepath.Join(tmp, "history.db"), lease: lease}, logPath, o.ready)
	if err != nil {
		return err
	}
	defer con.Stop()
	start := time.Now()
	end := start.Add(o.duration)
	observeUntil := end.Add(-o.tail)
	log.Printf("console %s ready; observing every %s until %s, then waiting for admissions until %s",
		con.Base, o.every, observeUntil.Format(time.TimeOnly), end.Format(time.TimeOnly))

	lctx, stopLoad := context.WithDeadline(ctx, observeUntil)
	defer stopLoad()
	ld := &loader{c: cl, runID: runID, every: o.submitEvery, minWaiting: o.minWaiting, max: o.maxExtra}
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); ld.run(lctx) }()

	obs := &observer{c: cl, base: con.Base}
	err = obs.loop(ctx, o.every, observeUntil)
	stopLoad()
	<-loadDone
	if err == nil {
		err = waitForAdmissions(ctx, adm, obs.pending, end)
	}
	res.Finished = time.Now().UTC()
	res.ConsoleExited = !con.Running()
	con.Stop()
	res.ExtraJobs, res.ExtraJobErrors = ld.created, ld.failed
	res.Rounds, res.RoundErrors, res.Unknown, res.NoEstimate = obs.rounds, obs.errors, obs.unknown, obs.none
	summarize(res, obs.observations, adm, start, time.Now())
	if res.ConsoleExited {
		res.Notes = append(res.Notes, "the console exited during the run; see "+logPath)
	}
	if err != nil {
		res.Notes = append(res.Notes, "the run stopped early: "+err.Error())
	}
	if werr := res.write(o.out, os.Stdout); werr != nil {
		return werr
	}
	return err
}

// waitForAdmissions waits until end, or until every task observed has been
// admitted or is gone.
func waitForAdmissions(ctx context.Context, adm *admissions, observed func() map[string]time.Time, end time.Time) error {
	last := time.Time{}
	for time.Now().Before(end) {
		waiting := 0
		for key, seen := range observed() {
			if _, ok := adm.firstAfter(key, seen); !ok && !adm.isGone(key) {
				waiting++
			}
		}
		if waiting == 0 {
			log.Printf("every observed task has been admitted or is gone")
			return nil
		}
		if time.Since(last) >= time.Minute {
			log.Printf("%d observed tasks still wait; waiting for admissions until %s", waiting, end.Format(time.TimeOnly))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(10*time.Second, time.Until(end))):
		}
	}
	return nil
}
