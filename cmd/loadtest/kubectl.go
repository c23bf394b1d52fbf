package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"time"
)

// kubectlResult is the manual way: kubectl's listing plus a script's
// per-priority-class table, timed as one figure.
type kubectlResult struct {
	Seconds        float64      `json:"seconds"`         // kubectl and the table
	KubectlSeconds float64      `json:"kubectl_seconds"` // until kubectl exited
	Bytes          int64        `json:"bytes"`
	Workloads      int          `json:"workloads"`
	Classes        []classTotal `json:"classes"`
}

// classTotal is one row of the per-priority-class table as a script
// computes it from the Workload objects.
type classTotal struct {
	Class              string  `json:"class"`
	Running            int     `json:"running"`
	Pending            int     `json:"pending"`
	Preempted          int     `json:"preempted"`
	AvgWaitSeconds     float64 `json:"avg_wait_seconds"`
	LongestWaitSeconds float64 `json:"longest_wait_seconds"`
}

// workloadList is the part of `kubectl get workloads -o json` the table
// needs (v1beta2 names the class in priorityClassRef, v1beta1 in
// priorityClassName).
type workloadList struct {
	Items []struct {
		Metadata struct {
			CreationTimestamp time.Time `json:"creationTimestamp"`
		} `json:"metadata"`
		Spec struct {
			PriorityClassRef *struct {
				Name string `json:"name"`
			} `json:"priorityClassRef"`
			PriorityClassName string `json:"priorityClassName"`
		} `json:"spec"`
		Status struct {
			Conditions []struct {
				Type               string    `json:"type"`
				Status             string    `json:"status"`
				LastTransitionTime time.Time `json:"lastTransitionTime"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// noClass is the table's row for Workloads that name no priority class.
const noClass = "(none)"

// classTable counts running, pending and preempted Workloads per priority
// class and their average and longest wait, the way Kueue defines wait:
// from creation (or the last requeue) to admission, or to now while
// waiting. Finished Workloads are left out.
func classTable(list *workloadList, now time.Time) []classTotal {
	type acc struct {
		classTotal
		waits   int
		waitSum float64
	}
	byClass := map[string]*acc{}
	for _, wl := range list.Items {
		class := wl.Spec.PriorityClassName
		if wl.Spec.PriorityClassRef != nil && wl.Spec.PriorityClassRef.Name != "" {
			class = wl.Spec.PriorityClassRef.Name
		}
		if class == "" {
			class = noClass
		}
		cond := map[string]bool{}
		since := map[string]time.Time{}
		for _, c := range wl.Status.Conditions {
			cond[c.Type] = c.Status == "True"
			since[c.Type] = c.LastTransitionTime
		}
		if cond["Finished"] {
			continue
		}
		a := byClass[class]
		if a == nil {
			a = &acc{classTotal: classTotal{Class: class}}
			byClass[class] = a
		}
		waitStart := wl.Metadata.CreationTimestamp
		if t, ok := since["Requeued"]; ok {
			waitStart = t
		}
		waitEnd := now
		switch {
		case cond["Preempted"]:
			a.Preempted++
		case cond["Admitted"]:
			a.Running++
			waitEnd = since["Admitted"]
		default:
			a.Pending++
		}
		wait := waitEnd.Sub(waitStart).Seconds()
		if wait < 0 {
			wait = 0
		}
		a.waits++
		a.waitSum += wait
		a.LongestWaitSeconds = max(a.LongestWaitSeconds, wait)
	}
	out := make([]classTotal, 0, len(byClass))
	for _, a := range byClass {
		if a.waits > 0 {
			a.AvgWaitSeconds = a.waitSum / float64(a.waits)
		}
		out = append(out, a.classTotal)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// runKubectlWay times `kubectl get workloads -A -o json | script`, the
// script being classTable, as one figure.
func runKubectlWay(ctx context.Context, kubectl, kubeconfig string) (kubectlResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "get", "workloads", "-A", "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stderr = io.Discard // kubectl 1.32 warns about the version skew
	out, err := cmd.StdoutPipe()
	if err != nil {
		return kubectlResult{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return kubectlResult{}, fmt.Errorf("starting %s: %w", kubectl, err)
	}
	counted := &countingReader{r: out}
	var list workloadList
	decodeErr := json.NewDecoder(counted).Decode(&list)
	_, _ = io.Copy(io.Discard, counted)
	waitErr := cmd.Wait()
	kubectlDone := time.Since(start)
	if waitErr != nil {
		return kubectlResult{}, fmt.Errorf("kubectl get workloads: %w", waitErr)
	}
	if decodeErr != nil {
		return kubectlResult{}, fmt.Errorf("reading kubectl's JSON: %w", decodeErr)
	}
	table := classTable(&list, time.Now())
	return kubectlResult{
		Seconds: time.Since(start).Seconds(), KubectlSeconds: kubectlDone.Seconds(),
		Bytes: counted.n, Workloads: len(list.Items), Classes: table,
	}, nil
}
