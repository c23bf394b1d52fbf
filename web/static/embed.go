// Package static holds the console's CSS and JavaScript, embedded in the
// binary: clusters are often air-gapped, so nothing is loaded from a CDN.
package static

import "embed"

//go:embed *.css *.js
var FS embed.FS
