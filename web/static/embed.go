// Package static holds the console's CSS and JavaScript, embedded in the
// binary: clusters are often air-gapped, so nothing is loaded from a CDN.
//
// It imports nothing of the console.
package static

import "embed"

//go:embed *.css *.js
var FS embed.FS
