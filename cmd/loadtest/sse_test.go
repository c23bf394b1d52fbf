package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSSEReaderSplitsEventsAsEventSourceDoes(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	stream := "retry: 2000\nevent: snapshot\ndata: 7\n\n" +
		": keep-alive\n\n" +
		"event: fragments\r\ndata: {\"a\":1,\r\ndata: \"b\":2}\r\n\r\n" +
		"data: no type\n\n" +
		"event: ignored-without-data\n\n" +
		"data:" + long + "\n\n" +
		"event: cut-off\ndata: 1\n"
	r := newSSEReader(strings.NewReader(stream))
	var got []sseEvent
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := []sseEvent{
		{Type: "snapshot", Data: "7"},
		{Type: "fragments", Data: "{\"a\":1,\n\"b\":2}"},
		{Type: "message", Data: "no type"},
		{Type: "message", Data: long},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if r.Retry != 2*time.Second {
		t.Errorf("retry = %s, want 2s from the stream", r.Retry)
	}
}
