// Package replica moves blobs between nodes: the write fan-out (a blob
// goes to its R ranked nodes in parallel; the write succeeds once W of
// them hold it) and remote reads (from the nearest live replica, with a
// hedged second request when the first is slow), and repair and rebalance
// (repair.go), which move copies home after failures and membership
// changes and restore under-replicated writes.
//
// The package sees other nodes only through the Peers interface (the
// transport package implements it over HTTP, tests and the simulator in
// memory) and the local copy through Local (blob.Store). It never sees an
// *http.Request.
//
// Write rule (placement.Policy): R is capped at the data nodes of the map
// and W at R; targets = placement.Place(map, hash, R).Targets — the R
// best-ranked live nodes, stand-ins taking the place of dead home nodes.
// Every target is sent the blob at once; Write returns when W have
// acknowledged (each acknowledges only after its fsync). When so many
// targets are missing or failed that W cannot be reached, a strict policy
// fails with a *placement.QuorumError (errors.Is placement.ErrNoQuorum)
// saying how many copies were reachable and how many are required; a
// non-strict one (the default) waits for every target to answer and
// succeeds if at least one holds the blob: the result's Copies then says
// Made < Wanted, the write is under-replicated (counted in WriteStats),
// and the caller records it for repair (meta's under-replicated records,
// RunUnder). The sends still running when Write returns go on in the
// background, bounded by Config.BackgroundTimeout: a straggler that misses
// the write is repaired later.
//
// Read rule: the local copy if there is one; otherwise the sources in
// placement order (live ones first) one after another, and when a request
// has not answered within HedgeAfter, a second request to the next source
// races it; the first full answer wins and the loser is cancelled. A
// source that fails is skipped at once. Timeouts are milliseconds, not
// tens of seconds: a hung node must not stall reads.
//
// Batching (batch.go): when Peers also implements BatchPeers, small blob
// writes to the same node that overlap in time leave in one PutBlobs call,
// group-commit style (no timer; a blob leaves at once unless MaxInflight
// batches to that node are already out). Each caller still waits for its
// own blob's ack, so the write rule above is unchanged.
//
// Cache (cache.go): with Config.CacheBytes, a node without a copy keeps
// whole small blobs it fetched, checked against their hash, in a bounded
// LRU; concurrent misses of one blob share one fetch. Blobs are immutable,
// so there is nothing to invalidate. A client node's cache is on disk
// instead (diskcache.go, DiskCache): its own blob store, whose copies are
// read as local ones, bounded by deleting the least recently used and
// compacting.
package replica
