// Package sim runs a whole Cairn cluster inside one test process and checks,
// under randomized faults, the promises the store makes.
//
// # The harness
//
// Run starts Voters + Learners nodes (default 3 + 2). Each node is the
// node's own core, built by internal/core as internal/node builds it:
// Pebble (over pebble's crashable in-memory FS) holding the Raft log and
// the namespace, a blob.Store over a vfs.Mem, consensus.Raft, the
// replicator, the repairer, the store, the placement map and the guard on
// peers' blob puts. Around it the sim adds only faults and its own
// stand-ins for what internal/node adds: the network (transport.MemNetwork
// instead of HTTP), a simulated failure detector instead of memberlist,
// and bootstrap instead of join (the harness writes the cluster map with
// meta.OpSetNode and adds learners with Raft.AddLearner). Not covered:
// HTTP, the registration loop and the admin API.
//
// Nodes talk over transport.MemNetwork: every delivery may be dropped,
// delayed (which reorders) or, for Raft messages, duplicated; links are
// cut by partitions. Time is a clock.Fake: the driver advances it in steps
// (10 ms), ticks every running node's Raft every 100 ms of fake time,
// and network delays, operation deadlines (4 s) and the simulated failure
// detector run on it. Between steps the driver waits until the nodes go
// quiet (a heuristic: no timer due, no delivery, no applied index moving
// across a few yields; and a node's previous tick taken before the next).
//
// Liveness: instead of memberlist, each node's placement map marks a
// member Dead when, for 1.5 s of fake time, it has been crashed or paused
// or the link between the two has been cut — the view is per observer, as
// a gossip detector's is during a partition. Each map change starts a
// repair pass on that node; every node also runs one every 3 s.
//
// Buckets: rep3 (R=3, W=2), rep1 (R=1), rep2 (R=2, W=1) and mirror (every
// node). The GC loop of every store runs (grace 10 s of fake time,
// interval 200 ms of real time: the store's ticker is not injectable).
//
// # The schedule
//
// makeSchedule draws, from the seed alone, the whole run: about 400
// operations at random times through random nodes (puts of 0 B to 200 KiB
// and a few multi-blob files of 4 MiB and more, a quarter of them reusing
// an earlier body so that blobs are shared and reaped while re-uploaded;
// half of the one-blob writes go through the bulk upload's
// store.Local.PutFiles instead of Put; deletes; reads) over 40 s of fake time, and a sequence of faults:
// isolating a node, splitting two nodes from the rest, cutting one link
// one way, crashing a node (its Pebble disk keeps what was synced, plus
// half of the unsynced data in a third of crashes; its blob disk loses
// unsynced bytes, with torn tails in half of them) and restarting it over
// the surviving disks, pausing a node (no ticks; every message to or from
// it held until it resumes), lossy periods (15 % drops, 10 % duplicates,
// up to 150 ms delays), sometimes a voter isolated while another node is
// down (no quorum for a while). At most one node is crashed or paused at a
// time. Execution skips an operation whose node is down or paused at that
// moment, which the schedule itself decides.
//
// Disk faults (evDisk, drawn from an RNG of their own so that the rest of
// a seed's schedule predates them): about one per 10 s, a node's blob
// disk fails for 0.3 to 3 s through the vfs seam (vfs.Mem.SetFault):
// half of its reads fail with EIO, or every write fails with EIO, or
// with ENOSPC (sometimes after a part of it), or every fsync fails. A
// store whose write or fsync failed turns read-only and is never retried;
// when the fault ends, such a node is killed and restarted over its disks,
// as an operator would. A put answered ErrNoSpace is "refused" in the
// model: it must never take effect.
//
// # The invariants
//
// Whenever the last fault in force ends during the workload (a heal), the
// driver holds the schedule, waits for every operation in flight to be
// answered and every node to apply the same index, and checks (a) below
// through every node, without repair, on every bucket including R=1;
// then the schedule resumes where it stopped (Result.Heals counts them).
//
// After the workload, everything heals: links restored, paused nodes
// resumed, crashed nodes restarted. The driver waits for every operation
// to be answered and every node to apply the same committed index, runs
// repair passes on every node until a round changes nothing and fails
// nothing, runs GC on every node, waits again for the logs, then checks:
//
//   - (a) Every path read through every node holds an allowed value. The
//     model records each write's invocation and answer on one logical
//     clock. A write acknowledged (nil error; a delete answered "not found")
//     took effect; any other error leaves the outcome unknown, forever (a
//     proposal that timed out may still apply). Allowed values: those of
//     writes not followed, in real time, by an acknowledged write; "absent"
//     too if no write was acknowledged. Bytes must also hash to the
//     inode's SHA-256. During the run, reads check only integrity (the
//     bytes match the inode, and some write put that value there): plain
//     reads may be stale.
//   - (b) Every node's namespace — every key but Raft's own "R" prefix,
//     including the replicated proposer sessions ("P") — is byte-identical,
//     at the same applied index.
//   - (c) Every blob the namespace references is on exactly the targets
//     placement gives it (all nodes live), and no node keeps a blob nothing
//     references once GC ran.
//
// TestSimDetects breaks each invariant on purpose to show the checks can
// fail.
//
// # Replaying
//
// A failure prints the seed and the command:
//
//	CAIRN_SIM_SEED=<n> go test ./internal/sim -run TestSim -v
//
// With one seed and -v the faults are logged as they happen;
// CAIRN_SIM_LOG=1 sends every component's debug log to stderr;
// CAIRN_SIM_STACKS=1 dumps all goroutines when a wait times out. `make
// test` runs the 12 seeds in sim_test.go; CAIRN_SOAK=1 (make soak) adds
// CAIRN_SOAK_SEEDS more (make soak SOAK_SEEDS=n; default 200); -short runs
// two short ones.
//
// # What replays exactly, and what does not
//
// The schedule — which operation runs when and where, with which body,
// and which fault starts and ends when — is a pure function of the seed.
// Crash clones and torn tails draw from their own seeded RNG, and the
// network's fault draws from its own, but both are drawn in the order the
// goroutines happen to reach them. Goroutine interleavings are not under
// the simulator's control (Raft, Pebble, group commit, replica fan-out and
// repair all run on their own goroutines; timeouts inside replica and the
// GC loop use real time), so a seed replays the same scenario, not the
// same execution: a failure caused by a race may need several replays, or
// a loaded machine, to show again. Loop on the seed when it does not.
//
// # What it does not cover
//
// HTTP front ends and the real HTTP transport; memberlist itself (the
// detector is simulated); join, the registration loop, membership changes
// after bootstrap (adding, draining, removing nodes), promotion of learners
// to replace a lost voter, force-new-cluster and witnesses; faults of the
// Pebble disk other than crashes (the namespace's disk: EIO, ENOSPC); clock skew between
// nodes (one fake clock); losing a disk for good; more than one node down
// at once; linearizability of reads (test/e2e checks a recorded history
// with porcupine on real processes under faults).
package sim
