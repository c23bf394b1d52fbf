package webtest

import (
	"net/url"
	"strings"
)

// GarbageBody is a request body a form must refuse without writing
// anything.
type GarbageBody struct {
	Name        string
	ContentType string
	Body        string
	// Rerendered: the body parses as a form, so the answer is the form
	// again with its errors (422); otherwise any 4xx.
	Rerendered bool
}

// repeatedKey builds "k=v&k=v…" n times.
func repeatedKey(k, v string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(v))
	}
	return b.String()
}

// GarbageBodies are hostile variants of a valid form base made invalid by
// poison: huge, malformed, repeated, too many rows (rowKey(i) is the i-th
// row's fields).
func GarbageBodies(base url.Values, rowKey func(i int) url.Values, poison url.Values) []GarbageBody {
	const form = "application/x-www-form-urlencoded"
	with := func(extra url.Values) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = append([]string{}, vs...)
		}
		for k, vs := range poison {
			v[k] = append([]string{}, vs...)
		}
		for k, vs := range extra {
			v[k] = append(append([]string{}, vs...), v[k]...) // extra values come first: they are the ones read
		}
		return v.Encode()
	}
	// Big values, the whole body (about 400 kB encoded) still under the
	// console's 1 MiB body limit.
	huge := strings.Repeat("<script>alert(1)</script>", 2_000) // 50 kB
	rowsOf := func(n int) url.Values {
		rows := url.Values{}
		for i := 0; i < n; i++ {
			for k, vs := range rowKey(i) {
				rows[k] = vs
			}
		}
		return rows
	}
	return []GarbageBody{
		{"huge values", form, with(url.Values{"name": {huge}, "description": {huge}, "users": {huge}, "class.0.name": {huge}, "prioritization": {huge}}), true},
		{"huge number", form, with(url.Values{"fairShareWeight": {strings.Repeat("9", 100_000)}, "class.0.weight": {strings.Repeat("9", 100_000)}}), true},
		{"invalid UTF-8", form, with(url.Values{"name": {"\xff\xfe\xfd"}, "description": {"\xc3\x28\xa0\xa1"}, "users": {"\xed\xa0\x80"},
			"class.0.name": {"\xff"}, "idleAllocation": {"\xe2\x82"}}), true},
		{"NUL and control characters", form, with(url.Values{"name": {"a\x00b"}, "groups": {"\x1b[31m"}, "class.0.name": {"a\x00"}}), true},
		{"repeated keys", form, with(nil) + "&" + repeatedKey("name", "Bad Name!", 1000) + "&" + repeatedKey("users", "alice", 5000) +
			"&" + repeatedKey("class.0.name", "x", 1000) + "&" + repeatedKey("quota.0.gpus", "-1", 1000), true},
		{"1,000 rows", form, with(rowsOf(1_000)), true},
		// More parameters than Go's url.ParseQuery accepts (10,000): the
		// form cannot be read, so no form to show again.
		{"10,000 rows", form, with(rowsOf(10_000)), false},
		{"odd row keys", form, with(url.Values{"quota.-1.gpus": {"1"}, "quota.99999999999999999999.gpus": {"1"}, "quota..gpus": {"1"},
			"class.-1.name": {"x"}, "class.1e3.name": {"y"}}), true},
		{"empty body", form, "", true},
		{"JSON body", "application/json", `{"name":"json-team","enabled":"true"}`, true},
		{"not percent-encoded", form, "name=%zz&enabled=%", false},
		{"semicolons", form, "name=a;enabled=true", false},
		{"broken multipart", "multipart/form-data; boundary=xyz", "--xyz\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx", false},
		{"body of 11 MB", form, "description=" + strings.Repeat("a", 11<<20), false},
	}
}

// TeamForm is a valid team form: name with gpus GPUs of ml.p5.48xlarge.
func TeamForm(name, gpus string) url.Values {
	return url.Values{"name": {name}, "enabled": {"true"}, "fairShareWeight": {"10"}, "preemption": {"LowerPriority"},
		"lending": {"LendAndBorrow"}, "borrowLimit": {"50"}, "users": {"alice"}, "groups": {"ml"},
		"quota.0.instanceType": {"ml.p5.48xlarge"}, "quota.0.gpus": {gpus}}
}
