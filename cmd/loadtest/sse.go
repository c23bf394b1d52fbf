package main

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	Type string // "message" when the stream names none
	Data string
}

// sseReader splits a text/event-stream as EventSource does: fields until a
// blank line, data lines joined with newlines, comments ignored, and the
// server's retry delay remembered for reconnects.
type sseReader struct {
	r     *bufio.Reader
	Retry time.Duration
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10), Retry: 3 * time.Second}
}

// Next returns the next event with data; io.EOF when the stream ends.
func (s *sseReader) Next() (sseEvent, error) {
	var typ string
	var data strings.Builder
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				if typ == "" {
					typ = "message"
				}
				return sseEvent{Type: typ, Data: data.String()}, nil
			}
			typ = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "retry":
			if ms, err := strconv.Atoi(string(value)); err == nil && ms >= 0 {
				s.Retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// line reads one line of any length without its line ending.
func (s *sseReader) line() ([]byte, error) {
	var long []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			continue
		}
		if err != nil {
			return nil, err
		}
		if long != nil {
			chunk = append(long, chunk...)
		}
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		return bytes.TrimSuffix(chunk, []byte("\r")), nil
	}
}
