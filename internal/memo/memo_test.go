package memo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOneAskForManyCallersWithinTheTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &Memo[int]{TTL: 30 * time.Second, FailureTTL: 5 * time.Second, Now: func() time.Time { return now }}
	var asked atomic.Int64
	release := make(chan struct{})
	ask := func(context.Context) (int, error) {
		asked.Add(1)
		<-release
		return 42, nil
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := m.Get(context.Background(), "k", ask); v != 42 || err != nil {
				t.Errorf("Get = %d, %v", v, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // all 20 wait for the one ask
	close(release)
	wg.Wait()
	if asked.Load() != 1 {
		t.Errorf("asked %d times for 20 concurrent callers, want 1", asked.Load())
	}
	now = now.Add(29 * time.Second)
	_, _ = m.Get(context.Background(), "k", ask)
	if asked.Load() != 1 {
		t.Errorf("asked again within the TTL")
	}
	now = now.Add(time.Second)
	_, _ = m.Get(context.Background(), "k", ask)
	if asked.Load() != 2 {
		t.Errorf("not asked again after the TTL")
	}
}

func TestFailuresAreRememberedBriefly(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &Memo[int]{TTL: time.Minute, FailureTTL: 5 * time.Second, Now: func() time.Time { return now }}
	var asked int
	fail := func(context.Context) (int, error) { asked++; return 0, errors.New("down") }
	for range 3 {
		if _, err := m.Get(context.Background(), "k", fail); err == nil {
			t.Fatal("no error")
		}
	}
	now = now.Add(5 * time.Second)
	_, _ = m.Get(context.Background(), "k", fail)
	if asked != 2 {
		t.Errorf("asked %d times, want once, then once after the failure TTL", asked)
	}
}

func TestACallerThatGivesUpDoesNotCancelTheAsk(t *testing.T) {
	m := &Memo[int]{TTL: time.Minute}
	release := make(chan struct{})
	var sawCancel atomic.Bool
	ask := func(ctx context.Context) (int, error) {
		<-release
		sawCancel.Store(ctx.Err() != nil)
		return 7, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := m.Get(ctx, "k", ask); first <- err }()
	time.Sleep(20 * time.Millisecond)
	second := make(chan int, 1)
	go func() { v, _ := m.Get(context.Background(), "k", ask); second <- v }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	close(release)
	if v := <-second; v != 7 || sawCancel.Load() {
		t.Errorf("the waiting caller got %d (ask canceled: %v), want 7 from an uncanceled ask", v, sawCancel.Load())
	}
	<-first
}

func TestBounded(t *testing.T) {
	m := &Memo[int]{TTL: time.Hour, Max: 10}
	for i := range 100 {
		_, _ = m.Get(context.Background(), string(rune('a'+i)), func(context.Context) (int, error) { return i, nil })
	}
	if len(m.answers) > 10 {
		t.Errorf("%d answers kept, want at most 10", len(m.answers))
	}
}

func TestLatestNeverWaits(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := &Memo[int]{TTL: 5 * time.Second, FailureTTL: time.Second, Now: clock}
	var asked atomic.Int64
	release := make(chan struct{})
	answer := atomic.Int64{}
	answer.Store(1)
	fail := atomic.Bool{}
	ask := func(context.Context) (int, error) {
		asked.Add(1)
		<-release
		if fail.Load() {
			return 0, errors.New("down")
		}
		return int(answer.Load()), nil
	}
	settle := func(want int64) {
		t.Helper()
		release <- struct{}{}
		deadline := time.Now().Add(5 * time.Second)
		for {
			m.mu.Lock()
			a := m.answers["k"]
			done := a != nil && answered(a)
			m.mu.Unlock()
			if done && asked.Load() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the background ask never finished")
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx := context.Background()

	// Nothing yet: no answer, one ask started, however many call.
	for range 3 {
		if v, ok := m.Latest(ctx, "k", ask); ok {
			t.Fatalf("before any answer: %d, true", v)
		}
	}
	settle(1)
	if v, ok := m.Latest(ctx, "k", ask); !ok || v != 1 || asked.Load() != 1 {
		t.Fatalf("after the answer: %d %v (asked %d), want 1 true once", v, ok, asked.Load())
	}

	// Stale: the old answer at once while one new ask runs.
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	answer.Store(2)
	for range 3 {
		if v, ok := m.Latest(ctx, "k", ask); !ok || v != 1 {
			t.Fatalf("while refreshing: %d %v, want the old 1", v, ok)
		}
	}
	settle(2)
	if v, ok := m.Latest(ctx, "k", ask); !ok || v != 2 {
		t.Fatalf("after the refresh: %d %v, want 2", v, ok)
	}

	// A failed refresh: no answer until it is asked again.
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	fail.Store(true)
	m.Latest(ctx, "k", ask)
	settle(3)
	if v, ok := m.Latest(ctx, "k", ask); ok {
		t.Fatalf("after a failure: %d, true", v)
	}
}

func TestRecentWaitsOnlyForTheFirstAnswer(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	m := &Memo[int]{TTL: 5 * time.Second, FailureTTL: time.Second, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	var asked atomic.Int64
	ask := func(context.Context) (int, error) { return int(asked.Add(1)), nil }
	ctx := context.Background()
	if v, err := m.Recent(ctx, "k", ask); err != nil || v != 1 {
		t.Fatalf("first: %d %v, want 1 (waited for)", v, err)
	}
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	if v, err := m.Recent(ctx, "k", ask); err != nil || v != 1 {
		t.Fatalf("stale: %d %v, want the old 1 at once", v, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, _ := m.Recent(ctx, "k", ask); v == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale answer was never refreshed")
		}
		time.Sleep(time.Millisecond)
	}
	if asked.Load() != 2 {
		t.Errorf("asked %d times, want 2", asked.Load())
	}
}

// Peek never makes a page wait longer than its grace: a source that answers
// (or fails) within it is shown, a slow one is pending until it answers.
func TestPeekWaitsOnlyForItsGrace(t *testing.T) {
	m := &Memo[int]{TTL: time.Minute, FailureTTL: time.Minute}
	ctx := context.Background()
	if v, pending, err := m.Peek(ctx, "fast", 50*time.Millisecond, func(context.Context) (int, error) { return 7, nil }); v != 7 || pending || err != nil {
		t.Errorf("a fast answer: %d %v %v", v, pending, err)
	}
	down := errors.New("connection refused")
	if _, pending, err := m.Peek(ctx, "down", 50*time.Millisecond, func(context.Context) (int, error) { return 0, down }); pending || !errors.Is(err, down) {
		t.Errorf("a source that is down: pending %v, err %v", pending, err)
	}
	release := make(chan struct{})
	slow := func(context.Context) (int, error) { <-release; return 9, nil }
	if _, pending, err := m.Peek(ctx, "slow", time.Millisecond, slow); !pending || err != nil {
		t.Errorf("a slow answer: pending %v, err %v; want pending", pending, err)
	}
	close(release)
	var v int
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got, pending, _ := m.Peek(ctx, "slow", 0, slow); !pending {
			v = got
			break
		}
	}
	if v != 9 {
		t.Errorf("the slow answer once in: %d", v)
	}
}
