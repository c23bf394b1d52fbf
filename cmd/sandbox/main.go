// Command sandbox starts, stops and reports a local Kubernetes + Kueue +
// Prometheus sandbox on 127.0.0.1 (see package sandbox).
//
//	sandbox up [--instance demo|test]     start (idempotent) and print the env as JSON
//	sandbox down [--instance demo|test]   stop the processes the instance started
//	sandbox status [--instance demo|test] exit 0 when running and healthy
//
// It talks to the console's binary and to the cluster, never to an in-process
// console: it must not import the console's web side (internal/app,
// internal/handlers, web), its write path, task history or sign-in.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/openquota/console/sandbox"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandbox up|down|status|agent [--instance demo|test]")
		os.Exit(2)
	}
	sandbox.RunningAsCommand = true
	verb := os.Args[1]
	fs := flag.NewFlagSet("sandbox "+verb, flag.ExitOnError)
	name := fs.String("instance", "demo", "sandbox instance: demo (with demo teams and jobs), test, or load")
	portBase := fs.Int("port-base", 0, "first port of the instance (default: the instance's own)")
	demo := fs.Bool("demo", false, "agent: run the demo job trickle")
	releaseEvicted := fs.Bool("release-evicted", false, "agent: clear the quota reservation of evicted Workloads no job owns")
	_ = fs.Parse(os.Args[2:])

	opts, err := instanceOptions(*name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *portBase != 0 {
		opts.PortBase = *portBase
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch verb {
	case "up":
		env, err := sandbox.Up(ctx, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		out, _ := json.MarshalIndent(env, "", "  ")
		fmt.Println(string(out))
	case "down":
		if err := sandbox.Down(opts); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "status":
		env, ok := sandbox.Status(ctx, opts)
		out, _ := json.MarshalIndent(env, "", "  ")
		fmt.Println(string(out))
		if !ok {
			fmt.Fprintln(os.Stderr, "not running")
			os.Exit(1)
		}
	case "agent":
		opts.Demo = *demo
		opts.ReleaseEvicted = *releaseEvicted
		if err := sandbox.RunAgent(ctx, opts); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown verb", verb)
		os.Exit(2)
	}
}

func instanceOptions(name string) (sandbox.Options, error) {
	switch name {
	case "demo":
		return sandbox.Demo, nil
	case "test":
		return sandbox.Test, nil
	case "load":
		return sandbox.Load, nil
	}
	return sandbox.Options{}, fmt.Errorf("unknown instance %q (demo or test)", name)
}
