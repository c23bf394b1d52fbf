package handlers

import (
	"fmt"
	"strconv"
	"strings"
)

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// formatMilli shows millicores as vCPUs, with decimals only when needed.
func formatMilli(m int64) string {
	if m%1000 == 0 {
		return itoa(m / 1000)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(m)/1000), "0"), ".")
}

// formatMiB shows MiB as GiB, with decimals only when needed.
func formatMiB(m int64) string {
	if m%1024 == 0 {
		return itoa(m / 1024)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", float64(m)/1024), "0"), ".")
}
