// Package spill is an ordered map of byte-string keys that moves to disk
// once it grows: the working lists of a tool that walks a whole tree
// (cairn sync's local and remote listings, a backup's manifest and plan)
// keep bounded memory whatever the number of files.
//
// A Map starts in memory. Past MemEntries keys it moves into a Pebble
// database in a temporary directory (no write-ahead log, nothing synced:
// it lives as long as the Map), whose memtables and block cache are
// small and fixed. Close removes that directory.
package spill
