#!/usr/bin/env python3
"""bench/locks.py: timings for bench/locks.sh (file locks, issue 20).

  pair FILE N          N uncontended flock(LOCK_EX) + flock(LOCK_UN) pairs
                       on FILE (opened once): mean and p99 of a pair, in µs
  fcntl FILE N         the same with fcntl F_SETLKW write lock + unlock
  handover A B N       N hand-overs of an exclusive flock from a process
                       holding it through path A to one waiting through
                       path B: from just before the unlock to the waiter's
                       return, in ms (median and p99)
  sqlite-init DB       a new SQLite database DB (rollback journal, SQLite's
                       default) with one table
  sqlite DB N TAG      N single-row transactions (BEGIN IMMEDIATE, INSERT,
                       COMMIT) into DB through one connection: commits a
                       second; waits for another writer's lock (60 s)
  sqlite-check DB ROWS the database's integrity_check and its row count,
                       against ROWS
"""
import fcntl
import os
import sqlite3
import statistics
import sys
import time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def pair(path, n, use_fcntl):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        if use_fcntl:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            fcntl.lockf(fd, fcntl.LOCK_UN)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)
        ts.append((time.perf_counter() - t) * 1e6)
    os.close(fd)
    print("mean_us=%.1f p99_us=%.1f n=%d p50_us=%.1f" % (statistics.mean(ts), pct(ts, 0.99), n, statistics.median(ts)))


def sqlite_init(db):
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("CREATE TABLE t (tag TEXT, i INTEGER, PRIMARY KEY (tag, i))")
    con.close()


def sqlite_writer(db, n, tag):
    con = sqlite3.connect(db, timeout=60, isolation_level=None)
    t = time.perf_counter()
    for i in range(n):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t VALUES (?, ?)", (tag, i))
        con.execute("COMMIT")
    s = time.perf_counter() - t
    con.close()
    print("commits_per_s=%.1f n=%d s=%.2f" % (n / s, n, s))


def sqlite_check(db, rows):
    con = sqlite3.connect(db, timeout=60)
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    got = con.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    con.close()
    print("integrity=%s rows=%d want=%d" % (ok, got, rows))
    return 0 if ok == "ok" and got == rows else 1


def handover(a, b, n):
    # Each round: the holder takes the lock, tells the waiter, which then
    # blocks in flock; the holder unlocks and sends the time; the waiter
    # answers how long its flock took to return after that.
    to_w_r, to_w_w = os.pipe()
    to_h_r, to_h_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the waiter, through b
        fd = os.open(b, os.O_RDWR)
        rd = os.fdopen(to_w_r, "r")
        for _ in range(n):
            assert rd.readline().strip() == "locked"
            fcntl.flock(fd, fcntl.LOCK_EX)
            got = time.time()
            sent = float(rd.readline())
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.write(to_h_w, ("%.6f\n" % ((got - sent) * 1e3)).encode())
        os._exit(0)
    fd = os.open(a, os.O_RDWR)
    rd = os.fdopen(to_h_r, "r")
    ms = []
    for _ in range(n):
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(to_w_w, b"locked\n")
        time.sleep(0.05)  # the waiter is queued by then
        t = time.time()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.write(to_w_w, ("%.6f\n" % t).encode())
        ms.append(float(rd.readline()))
    os.waitpid(pid, 0)
    print("median_ms=%.2f p99_ms=%.2f n=%d" % (statistics.median(ms), pct(ms, 0.99), n))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd in ("pair", "fcntl"):
        pair(sys.argv[2], int(sys.argv[3]), cmd == "fcntl")
    elif cmd == "handover":
        handover(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "sqlite-init":
        sqlite_init(sys.argv[2])
    elif cmd == "sqlite":
        sqlite_writer(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "sqlite-check":
        sys.exit(sqlite_check(sys.argv[2], int(sys.argv[3])))
    else:
        sys.exit(__doc__)
