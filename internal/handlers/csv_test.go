package handlers

import (
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
)

func TestSafeCell(t *testing.T) {
	cases := map[string]string{
		"=SUM(A1:A2)": "'=SUM(A1:A2)", "+1": "'+1", "@cmd": "'@cmd", "-2+3": "'-2+3", "\t=x": "'\t=x",
		"-12.5": "-12.5", "plain": "plain", "": "", "a=b": "a=b",
	}
	for in, want := range cases {
		if got := safeCell(in); got != want {
			t.Errorf("safeCell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCSVStream(t *testing.T) {
	e := echo.New()
	rec := httptest.NewRecorder()
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/x?format=csv", nil), rec)
	s, err := startCSV(c, "x.csv", "Team", "GPUs (count)")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1200; i++ {
		if err := s.Row("=evil, \"quoted\"\nline", "3"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	records, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1201 {
		t.Fatalf("%d records, want 1201", len(records))
	}
	if diff := cmp.Diff([]string{"'=evil, \"quoted\"\nline", "3"}, records[1]); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
