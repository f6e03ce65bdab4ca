package main

import "testing"

// TestServingLine: the URL a started node prints first is one the user can
// open: loopback for a lone node on a wildcard listener, IPv6 bracketed.
func TestServingLine(t *testing.T) {
	for _, c := range []struct {
		url, local string
		cluster    bool
		want       string
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", false, "cairn: serving http://127.0.0.1:8080"},
		{"http://[fd00::2]:8080", "http://127.0.0.1:8080", false, "cairn: serving http://127.0.0.1:8080 (from other machines: http://[fd00::2]:8080)"},
		{"http://files.example.com:80", "http://127.0.0.1:80", false, "cairn: serving http://127.0.0.1:80 (from other machines: http://files.example.com:80)"},
		{"http://10.0.0.1:8080", "http://10.0.0.1:8080", true, "cairn: serving http://10.0.0.1:8080"},
		{"http://10.0.0.1:8080", "http://127.0.0.1:8080", true, "cairn: serving http://10.0.0.1:8080 (as recorded in the cluster map; from this machine: http://127.0.0.1:8080)"},
	} {
		if got := servingLine(c.url, c.local, c.cluster); got != c.want {
			t.Errorf("servingLine(%s, %s, %v) =\n  %s\nwant\n  %s", c.url, c.local, c.cluster, got, c.want)
		}
	}
}
