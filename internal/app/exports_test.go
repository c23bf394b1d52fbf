package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/taskhistory"
)

// smallSendBuffers makes each accepted connection's kernel send buffer
// small, so that a client that stops reading stops the server's writes
// after kilobytes rather than megabytes.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// stalledDownload asks for path over a real TCP connection with a small
// receive buffer, reads the status line and the first bytes of the answer,
// and then stops reading, keeping the connection open until the test ends.
// It returns the status (0: no answer within 10 s) and, for an answer other
// than 200, its body.
func stalledDownload(t *testing.T, addr, path string) (int, string) {
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := dialer.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		t.Error(err)
		return 0, ""
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	if err != nil {
		return 0, ""
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return res.StatusCode, string(body)
	}
	_, _ = io.ReadFull(res.Body, make([]byte, 256)) // the first rows, then nothing more
	return res.StatusCode, ""
}

// fillReport writes n open tasks of team into the store: a per-task
// report of a few hundred kilobytes.
func fillReport(t *testing.T, st *taskhistory.Store, s domain.Settings, team string, n int) {
	t.Helper()
	created := time.Now().Add(-time.Hour).UTC()
	var b taskhistory.Batch
	for i := range n {
		b.Changes = append(b.Changes, taskhistory.Change{Task: taskhistory.Task{
			UID: fmt.Sprintf("uid-%s-%05d", team, i), Namespace: s.Namespace(team), Name: fmt.Sprintf("export-task-%05d", i),
			Team: team, Class: "low", ClusterQueue: s.ClusterQueue(team), LocalQueue: s.LocalQueue(team),
			Created: created, WaitStart: created, State: domain.TaskPending, Requests: taskhistory.Resources{GPUs: 1},
		}})
	}
	if _, err := st.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	id, err := st.StartRun(context.Background(), "exports-test", now.Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Heartbeat(context.Background(), id, now); err != nil {
		t.Fatal(err)
	}
}

// Clients that start a CSV export of the task history and stop reading:
// each held one of the store's connections for as long as it stalled (up to
// the 2-minute write timeout), so that a handful of them made every page
// built on the history fail and the recorder's writes time out. Now the
// exports hold no connection while they wait for the client, and one user
// may run only a few exports at once (the others get 429 and a sentence).
func TestStalledCSVDownloadsStarveNothing(t *testing.T) {
	forEachTaskHistoryStore(t, func(t *testing.T, hs taskHistoryStore) {
		s := taskHistorySettings()
		st := hs.open(t)
		hc := startTaskHistoryConsole(t, s, storeTaskHistory(st), nil, nil)
		team := "export-" + rand.String(4)
		fillReport(t, st, s, team, 3000)

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := handlers.NewHTTPServer(hc.h, handlers.DefaultTimeouts)
		go func() { _ = srv.Serve(smallSendBuffers{ln}) }()
		t.Cleanup(func() { _ = srv.Close() })

		// More stalled downloads than either store has connections; one
		// user may run 2 exports at once (DefaultExportLimits).
		const downloads, perUser = 9, 2
		codes := make([]int, downloads)
		bodies := make([]string, downloads)
		var wg sync.WaitGroup
		for i := range downloads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], bodies[i] = stalledDownload(t, ln.Addr().String(), "/reports/usage?source=history&format=csv&table=tasks")
			}()
			time.Sleep(50 * time.Millisecond) // in order
		}
		wg.Wait()
		got := map[int]int{}
		for i, code := range codes {
			got[code]++
			if code == http.StatusTooManyRequests && !strings.Contains(bodies[i], "Too many downloads") {
				t.Errorf("download %d: 429 without saying why: %q", i+1, bodies[i])
			}
		}
		want := map[int]int{http.StatusOK: perUser, http.StatusTooManyRequests: downloads - perUser}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%d stalled downloads of one user answered (status: count) %v, want %v", downloads, got, want)
		}

		// The pages and the recorder still reach the store.
		start := time.Now()
		code, body := hc.get(t, "/preemptions?window=90d")
		if code != http.StatusOK || strings.Contains(body, "The task history is unavailable") {
			t.Errorf("GET /preemptions while downloads stall = %d after %v, says the history is unavailable: %v",
				code, time.Since(start).Round(100*time.Millisecond), strings.Contains(body, "The task history is unavailable"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := st.Write(ctx, taskhistory.Batch{Changes: []taskhistory.Change{{Task: taskhistory.Task{
			UID: "uid-" + team + "-meanwhile", Namespace: s.Namespace(team), Name: "meanwhile", Team: team,
			Created: time.Now(), WaitStart: time.Now(), State: domain.TaskPending,
		}}}}); err != nil {
			t.Errorf("the recorder's write while downloads stall: %v", err)
		}
	})
}
