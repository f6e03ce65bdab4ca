package kv

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestPebbleCrashKeepsSynced: a batch committed with sync=true survives a
// crash that drops every unsynced byte; a later unsynced batch is either
// wholly present or wholly absent.
func TestPebbleCrashKeepsSynced(t *testing.T) {
	fs := pvfs.NewCrashableMem()
	s, err := OpenPebble("db", PebbleConfig{FS: fs, Logger: discardLogger()})
	must(t, err)
	for i := 0; i < 50; i++ {
		bt := s.NewBatch()
		must(t, bt.Set(fmt.Appendf(nil, "synced%02d", i), []byte("v")))
		must(t, bt.Commit(true))
	}
	bt := s.NewBatch()
	for i := 0; i < 10; i++ {
		must(t, bt.Set(fmt.Appendf(nil, "unsynced%02d", i), []byte("v")))
	}
	must(t, bt.Commit(false))

	crashed := fs.CrashClone(pvfs.CrashCloneCfg{}) // only synced data survives
	must(t, s.Close())

	s2, err := OpenPebble("db", PebbleConfig{FS: crashed, Logger: discardLogger()})
	must(t, err)
	defer s2.Close()
	for i := 0; i < 50; i++ {
		if _, err := s2.Get(fmt.Appendf(nil, "synced%02d", i)); err != nil {
			t.Fatalf("synced key %d lost after crash: %v", i, err)
		}
	}
	n := 0
	must(t, s2.Scan([]byte("unsynced"), []byte("unsyncee"), func(k, v []byte) bool { n++; return true }))
	if n != 0 && n != 10 {
		t.Fatalf("unsynced batch partially applied: %d of 10 keys", n)
	}
}

func TestPebbleConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  PebbleConfig
		ok   bool
	}{
		{"zero", PebbleConfig{}, true},
		{"defaults", DefaultPebbleConfig(), true},
		{"negative cache", PebbleConfig{CacheSize: -1}, false},
		{"tiny memtable", PebbleConfig{MemTableSize: 1000}, false},
		{"huge memtable", PebbleConfig{MemTableSize: 4 << 30}, false},
		{"bloom too big", PebbleConfig{BloomBitsPerKey: 100}, false},
		{"bloom disabled", PebbleConfig{BloomBitsPerKey: -1}, true},
		{"negative files", PebbleConfig{MaxOpenFiles: -1}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: error %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
	if _, err := OpenPebble("db", PebbleConfig{FS: pvfs.NewMem(), CacheSize: -5}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("OpenPebble with bad config: %v", err)
	}
}

func TestPebbleReopen(t *testing.T) {
	fs := pvfs.NewMem()
	s, err := OpenPebble("db", PebbleConfig{FS: fs, Logger: discardLogger()})
	must(t, err)
	mustSet(t, s, "a", "1")
	must(t, s.Close())
	s, err = OpenPebble("db", PebbleConfig{FS: fs, Logger: discardLogger()})
	must(t, err)
	defer s.Close()
	if v, err := s.Get([]byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("after reopen: %q %v", v, err)
	}
}
