package handlers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/taskhistory"
)

func TestQuoteName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nlp", `"nlp"`},
		{"a\"b\nc", `"a\"b\nc"`},
		{strings.Repeat("x", 64), `"` + strings.Repeat("x", 64) + `"`},
		{strings.Repeat("x", 65), `"` + strings.Repeat("x", 64) + `…"`},
		{strings.Repeat("é", 100), `"` + strings.Repeat("é", 64) + `…"`},
	} {
		if got := quoteName(tc.in); got != tc.want {
			t.Errorf("quoteName(%.20q…) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestShownTo(t *testing.T) {
	p := taskhistory.Preemption{
		Task:      taskhistory.TaskRef{UID: "u1", Namespace: "hp-a", Name: "mine", Team: "a", Class: "low"},
		Preemptor: taskhistory.TaskRef{UID: "u2", Namespace: "hp-b", Name: "theirs", Team: "b", Class: "high"},
		Message:   "Preempted to accommodate a workload (UID: u2, JobUID: j2) due to reclamation; preemptor path: /pool/hp-b-clusterqueue",
	}
	hidden := p
	hidden.Preemptor = taskhistory.TaskRef{Team: "b", Class: "high"}
	hidden.Message = "Preempted to accommodate a workload (UID: (not shown), JobUID: (not shown)) due to reclamation; preemptor path: /pool/hp-b-clusterqueue"
	unknown := p
	unknown.Preemptor = taskhistory.TaskRef{UID: "u3"}
	unknownHidden := unknown
	unknownHidden.Preemptor = taskhistory.TaskRef{}
	unknownHidden.Message = hidden.Message
	for _, tc := range []struct {
		name    string
		in      taskhistory.Preemption
		visible scope
		want    taskhistory.Preemption
		shown   bool
	}{
		{"a platform viewer", p, scope{all: true}, p, true},
		{"a member of both teams", p, scope{teams: map[string]bool{"a": true, "b": true}}, p, true},
		{"a member of the preempted team only", p, scope{teams: map[string]bool{"a": true}}, hidden, false},
		{"a preemptor of no known team", unknown, scope{teams: map[string]bool{"a": true}}, unknownHidden, false},
	} {
		got, shown := shownTo(tc.in, tc.visible)
		if diff := cmp.Diff(tc.want, got); diff != "" || shown != tc.shown {
			t.Errorf("%s: shown %v (want %v) (-want +got):\n%s", tc.name, shown, tc.shown, diff)
		}
	}
}

func TestWarningsRepeatAfterAMinute(t *testing.T) {
	var w warnings
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		msg  string
		at   time.Duration
		want bool
	}{
		{"a", 0, true}, {"a", time.Second, false}, {"b", time.Second, true}, {"a", warnEvery - time.Millisecond, false}, {"a", warnEvery, true},
	} {
		if got := w.due(tc.msg, start.Add(tc.at)); got != tc.want {
			t.Errorf("due(%q) at +%v = %v, want %v", tc.msg, tc.at, got, tc.want)
		}
	}
	if !(*warnings)(nil).due("a", start) {
		t.Error("a nil *warnings does not log")
	}
}

func TestExportGate(t *testing.T) {
	g := newExportGate(ExportLimits{PerUser: 2, Total: 3})
	var leaves []func()
	enter := func(user string) string {
		leave, refusal := g.enter(user)
		if leave != nil {
			leaves = append(leaves, leave)
		}
		return refusal
	}
	var got []bool
	for _, user := range []string{"ann", "ann", "ann", "bob", "cid"} {
		got = append(got, enter(user) == "")
	}
	if diff := cmp.Diff([]bool{true, true, false, true, false}, got); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	if r := enter("ann"); !strings.Contains(r, "you already have 2 exports") {
		t.Errorf("the third export of one user: %q", r)
	}
	if r := enter("cid"); !strings.Contains(r, "busy with other exports") {
		t.Errorf("an export past the total: %q", r)
	}
	leaves[0]()
	leaves[0]() // leaving twice frees one place
	if r := enter("cid"); r != "" {
		t.Errorf("after one export ended: %q", r)
	}
	if r := enter("dan"); r == "" {
		t.Error("a fourth export was admitted with a total of 3")
	}
}
