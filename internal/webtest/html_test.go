package webtest

import "testing"

// The check itself catches each payload printed raw.
func TestMarkupProblemsCatchInjection(t *testing.T) {
	clean := `<!DOCTYPE html><html><head><script src="/static/app.js" defer></script></head><body>` +
		`<textarea>&lt;script&gt;alert(1)&lt;/script&gt;</textarea><svg viewBox="0 0 1 1"></svg></body></html>`
	if p := MarkupProblems(clean); len(p) != 0 {
		t.Errorf("an escaped page reported: %v", p)
	}
	for _, page := range []string{
		`<p>` + HostilePayloads[0] + `</p>`,
		`<input value="` + HostilePayloads[1] + `">`,
		`<input value='` + HostilePayloads[2] + `'>`,
		`<textarea>` + HostilePayloads[3] + `</textarea>`,
		`<a href="` + HostilePayloads[4] + `">x</a>`,
		`<a href="/x" onclick="alert(1)">x</a>`,
	} {
		if len(MarkupProblems(page)) == 0 {
			t.Errorf("not caught: %s", page)
		}
	}
}
