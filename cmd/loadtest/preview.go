package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// previewResult is the impact preview phase: an admin reviewing a team's
// quota cut, one preview after the other, while Kueue churns.
type previewResult struct {
	Previews     int     `json:"previews"`
	Failed       int     `json:"failed"`
	P50Seconds   float64 `json:"p50_seconds"`
	P95Seconds   float64 `json:"p95_seconds"`
	MaxSeconds   float64 `json:"max_seconds"`
	RSSBeforeMiB float64 `json:"rss_before_mib"`
	// RSSPeakMiB is the highest RSS sampled while previews ran; the
	// preview's own memory is its rise over RSSBeforeMiB.
	RSSPeakMiB float64 `json:"rss_peak_mib"`
	Basis      string  `json:"basis"` // the preview's own footnote, once
}

var (
	csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)
	basisLine = regexp.MustCompile(`id="impact-basis">([^<]+)<`)
)

// measurePreviews asks for the impact of cutting one team's GPU quota in
// half, as the team form's Review button does, --previews times in a row.
func (r *runner) measurePreviews(ctx context.Context) error {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	client := &http.Client{Jar: jar, Timeout: time.Minute}
	team := r.teams[len(r.teams)/2].Name
	edit := r.con.Base + "/teams/" + url.PathEscape(team) + "/edit"
	log.Printf("impact previews: %d reviews of a quota cut of team %s", r.o.previews, team)
	res := previewResult{RSSBeforeMiB: mib(readProc(r.pid).RSSBytes)}
	rss := watchRSS(r.pid, 50*time.Millisecond)
	var took []float64
	for i := 0; i < r.o.previews && ctx.Err() == nil; i++ {
		d, basis, err := previewOnce(ctx, client, edit, r.con.Base+"/teams/"+url.PathEscape(team), team)
		if err != nil {
			res.Failed++
			if res.Failed == 1 {
				r.res.Notes = append(r.res.Notes, "impact preview: "+err.Error())
			}
			continue
		}
		took = append(took, d.Seconds())
		if res.Basis == "" {
			res.Basis = basis
		}
	}
	res.RSSPeakMiB = mib(rss.Stop())
	res.Previews = len(took)
	if len(took) > 0 {
		slices.Sort(took)
		res.P50Seconds, res.P95Seconds, res.MaxSeconds = took[len(took)/2], took[(len(took)*95+99)/100-1], took[len(took)-1]
	}
	r.res.Preview = &res
	log.Printf("impact preview: p50 %s p95 %s max %s, RSS %.0f → peak %.0f MiB (%d failed) — %s", fmtSeconds(res.P50Seconds),
		fmtSeconds(res.P95Seconds), fmtSeconds(res.MaxSeconds), res.RSSBeforeMiB, res.RSSPeakMiB, res.Failed, res.Basis)
	return nil
}

// previewOnce loads the edit form (for its CSRF token) and posts the cut
// with step=preview; it times the post.
func previewOnce(ctx context.Context, client *http.Client, edit, action, team string) (time.Duration, string, error) {
	page, err := getBody(ctx, client, edit)
	if err != nil {
		return 0, "", err
	}
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		return 0, "", fmt.Errorf("the edit form of %s has no CSRF token", team)
	}
	// The load sandbox's teams, as cmd/loadgen writes them, with half the GPUs.
	form := url.Values{"_csrf": {m[1]}, "step": {"preview"}, "name": {team}, "enabled": {"true"}, "fairShareWeight": {"10"},
		"preemption": {"LowerPriority"}, "lending": {"LendAndBorrow"}, "borrowLimit": {"50"},
		"quota.0.instanceType": {"ml.p5.48xlarge"}, "quota.0.gpus": {"4"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, action, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="impact"`) {
		return 0, "", fmt.Errorf("preview of %s: %d %.200s", team, resp.StatusCode, body)
	}
	basis := ""
	if b := basisLine.FindStringSubmatch(string(body)); b != nil {
		basis = html.UnescapeString(b[1])
	}
	return took, basis, nil
}

func getBody(ctx context.Context, client *http.Client, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d", u, resp.StatusCode)
	}
	return string(body), err
}
