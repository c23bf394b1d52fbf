// Package templates renders the console's pages (templ components; the
// generated _templ.go files are committed). Components take view models
// with strings ready to show, defined here; the package must not import any
// of the console's internal packages.
package templates
