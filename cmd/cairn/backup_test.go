package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/backup"
)

// TestBackupArgs: mistakes in a backup's or restore's arguments are
// refused before anything is read or written, with what to write instead.
func TestBackupArgs(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "web", "http://10.0.0.2:8080/bak"}, "cairn://HOST:PORT/BUCKET[/PREFIX] (cairns:// for HTTPS)"},
		{[]string{"backup", "web", "ftp://x/y"}, `unknown scheme "ftp"`},
		{[]string{"backup", "web", "cairn://host:8080"}, "expected cairn://HOST:PORT/BUCKET[/PREFIX]"},
		{[]string{"backup", "web", "s3://"}, "expected s3://BUCKET[/PREFIX]"},
		{[]string{"backup", "web", "s3://b/../x"}, "bad path"},
		{[]string{"backup", "web/site", dir}, "a backup copies a whole bucket"},
		{[]string{"backup", "web", dir, "--jobs", "0"}, "--jobs must be at least 1"},
		{[]string{"restore", filepath.Join(dir, "none"), "web"}, "no such file or directory"},
		{[]string{"restore", dir, "web", "--jobs", "0"}, "--jobs must be at least 1"},
	} {
		_, _, err := cliRun(t, nil, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cairn %s: err %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	// A restore does not make its source.
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Errorf("restore made its source: %v", err)
	}
}

func TestBackupSummaryFormat(t *testing.T) {
	s := backupSummary(backup.Stats{Bucket: "web", Snapshot: "backup-x", Files: 300, Bytes: 30e6, Copied: 10, CopiedBytes: 5e6,
		LocalCopies: 1, Unchanged: 290, Checked: 2, Deleted: 3, Foreign: 1, SnapshotTaken: true, ManifestWritten: true,
		Elapsed: 2 * time.Second}, "/backups/web")
	want := "backup of web (snapshot backup-x) to /backups/web: copied 10 files (5.0 MB), 1 of them from identical files already there, " +
		"290 unchanged (2 checked at the destination), deleted 3, failed 0, left alone 1 files that are not the backup's; " +
		"300 files, 30.0 MB in the backup; in 2.0 s (2.5 MB/s); snapshot deleted"
	if s != want {
		t.Fatalf("got  %q\nwant %q", s, want)
	}
	s = backupSummary(backup.Stats{Bucket: "web", Snapshot: "mine", Failures: []backup.Failure{{Path: "a"}}, Elapsed: time.Second}, "d")
	if !strings.HasSuffix(s, "failed 1; 0 files, 0.0 MB in the backup; in 1.0 s (0.0 MB/s); NOT COMPLETE: the manifest is unchanged") {
		t.Fatalf("incomplete: %q", s)
	}
}
