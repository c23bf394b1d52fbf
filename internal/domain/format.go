// This file writes figures for people, the same on pages and in CSV.

package domain

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// FormatVCPU writes millicores as vCPUs, with decimals only when needed
// ("48", "0.5").
func FormatVCPU(milli int64) string {
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return trimZeros(fmt.Sprintf("%.3f", float64(milli)/1000))
}

// FormatGiB writes MiB as GiB, with decimals only when needed ("512",
// "1.5").
func FormatGiB(mib int64) string {
	if mib%1024 == 0 {
		return strconv.FormatInt(mib/1024, 10)
	}
	return trimZeros(fmt.Sprintf("%.2f", float64(mib)/1024))
}

func trimZeros(s string) string { return strings.TrimRight(strings.TrimRight(s, "0"), ".") }

// FormatPercent writes part of whole as a whole percentage ("73"); ok is
// false when whole is 0.
func FormatPercent(part, whole int64) (string, bool) {
	if whole == 0 {
		return "", false
	}
	return FormatPercentValue(float64(part) * 100 / float64(whole)), true
}

// FormatPercentValue writes a percentage as a whole number ("73"), halves
// rounded up as people round them (1 of 8 is "13", not "12").
func FormatPercentValue(v float64) string {
	return strconv.FormatFloat(math.Round(v)+0, 'f', 0, 64) // +0: no "-0"
}

// FormatHours writes hours (GPU-hours and the like) with two decimals.
func FormatHours(h float64) string { return fmt.Sprintf("%.2f", h) }

// FormatPercentTenths writes an average percentage with one decimal ("73.4").
func FormatPercentTenths(v float64) string { return fmt.Sprintf("%.1f", v) }

// FormatDuration shows a duration briefly: "2h 05m", "3d 04h", "45s".
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// FormatGPUs writes a number of GPUs that may be a fraction: "1", "0.43".
func FormatGPUs(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
}

// CountOf is n of noun in words: "1 GPU", "3 GPUs".
func CountOf(n int64, noun string) string { return plural(strconv.FormatInt(n, 10), noun) }
