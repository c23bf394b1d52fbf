package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"time"
)

// freeLoopback is a free loopback address for the console's profiles.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// profilePage takes the console's CPU profile while page's clients run, when
// --profile names it; the returned func waits for it and writes it to
// <out>-<page>.pprof.
func (r *runner) profilePage(ctx context.Context, page string) func() {
	return r.profileAfter(ctx, page, 0, max(1, int(r.o.pageDuration/time.Second)-1))
}

// profileAfter takes the console's CPU profile for seconds, after delay,
// when --profile names page ("watch": while the watchers watch).
func (r *runner) profileAfter(ctx context.Context, page string, delay time.Duration, seconds int) func() {
	if r.profileBase == "" || !r.o.profile[page] {
		return func() {}
	}
	path := fmt.Sprintf("%s-%s.pprof", r.o.out, unsafeInName.ReplaceAllString(page, "_"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", r.profileBase, seconds)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			log.Printf("profile of %s: %v", page, err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Printf("profile of %s: %v", page, err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			log.Printf("profile of %s: %v", page, err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			log.Printf("profile of %s: %v", page, err)
			return
		}
		log.Printf("profile of %s: %s", page, path)
	}()
	return func() { <-done }
}
