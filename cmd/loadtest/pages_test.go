package main

import "testing"

func TestCSVRowsCountsRecordsNotLines(t *testing.T) {
	csv := "name,why\r\n" +
		"a,plain\r\n" +
		"b,\"two\nlines, and \"\"quotes\"\"\"\r\n" +
		"c,\"\"\r\n"
	for _, chunk := range []int{1, 3, len(csv)} { // split anywhere, as reads arrive
		var c csvRows
		for i := 0; i < len(csv); i += chunk {
			c.scan([]byte(csv[i:min(i+chunk, len(csv))]))
		}
		if c.records != 4 {
			t.Errorf("chunks of %d: %d records; want 4 (header and 3 rows)", chunk, c.records)
		}
	}
}
