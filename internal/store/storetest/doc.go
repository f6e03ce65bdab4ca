// Package storetest makes a real store.Local over in-memory parts (blobs
// on vfs.NewMem, kv.NewMem, a single-node consensus.Local) for the tests
// of the front ends. It does no I/O outside memory.
//
// It is for tests: no production code imports it.
package storetest
