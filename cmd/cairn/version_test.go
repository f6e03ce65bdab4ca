package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/meta"
)

func TestVersionCmd(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("cairn %v: %v", args, err)
		}
		return out.String()
	}
	text := run("version")
	for _, want := range []string{"cairn 0.", "\ncommit ", "\ngo go1.", fmt.Sprintf("log encodings: command 2-%d, inode 1-2, bucket 2-6", meta.LogVersionMax)} {
		if !strings.Contains(text, want) {
			t.Errorf("cairn version: %q lacks %q", text, want)
		}
	}
	var r struct {
		Release   string `json:"release"`
		Commit    string `json:"commit"`
		Encodings []struct {
			Name     string
			Min, Max int
		} `json:"log_encodings"`
	}
	if err := json.Unmarshal([]byte(run("version", "--json")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Release == "" || r.Commit == "" || len(r.Encodings) < 6 || r.Encodings[0].Name != "command" || r.Encodings[0].Max < 8 {
		t.Fatalf("cairn version --json: %+v", r)
	}
}
