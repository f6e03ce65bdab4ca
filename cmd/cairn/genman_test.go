package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenMan: the hidden gen-man command writes a page per command, with
// the server's settings and their environment variables, dated by
// SOURCE_DATE_EPOCH; it is not listed in the help.
func TestGenMan(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000") // 2023-11-14
	dir := filepath.Join(t.TempDir(), "man1")
	root := newRootCmd()
	root.SetArgs([]string{"gen-man", dir})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"cairn.1", "cairn-server.1", "cairn-bucket-create.1", "cairn-completion-bash.1"} {
		if _, err := os.Stat(filepath.Join(dir, page)); err != nil {
			t.Errorf("no %s: %v", page, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cairn-gen-man.1")); err == nil {
		t.Error("the hidden gen-man command has a page")
	}
	b, err := os.ReadFile(filepath.Join(dir, "cairn-server.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "CAIRN" "1" "Nov 2023" "Cairn `, `\fB--listen\fP="127.0.0.1:8080"`, "(env CAIRN_LISTEN)", `\fB--secret-file\fP`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("cairn-server.1 lacks %q", want)
		}
	}
	var help bytes.Buffer
	root = newRootCmd()
	root.SetOut(&help)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(help.String(), "gen-man") {
		t.Error("cairn --help lists gen-man")
	}
}
