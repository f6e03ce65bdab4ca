#!/usr/bin/env python3
"""A lock client for the e2e lock tests (test/e2e/locks_test.go).

Interactive mode (no arguments): reads one command per line on stdin and
answers one line on stdout, so that a test drives several processes on
several mounts step by step:

  open PATH                 open (create) PATH read-write
  flock sh|ex|un [nb]       flock(2)
  lock r|w|u START LEN [nb] fcntl F_SETLKW (F_SETLK with nb); LEN 0 = to EOF
  ofd r|w|u START LEN [nb]  the same with F_OFD_SETLKW / F_OFD_SETLK
  getlk r|w START LEN       F_GETLK: "unlocked" or "TYPE START LEN PID"
  write TEXT                replace the file's content with TEXT
  read                      the file's content
  close                     close the descriptor
  pid                       this process's pid

Every answer is "ok", "ok <value>", or the errno's name (EAGAIN, EINTR,
EDEADLK, EIO, ENOLCK...). Python retries calls interrupted by a signal
(PEP 475), as C programs with SA_RESTART do not for fcntl: a test that
wants EINTR sends SIGUSR1, whose handler raises.

Batch modes:
  sqlite DB ROWS TAG        insert ROWS rows into DB (rollback journal,
                            default locking), retrying while it is busy
  counter FILE N            N times: flock FILE, read the number in it,
                            write it plus one, unlock
"""
import errno
import fcntl
import os
import signal
import sqlite3
import struct
import sys
import time

F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
TYPES = {"r": fcntl.F_RDLCK, "w": fcntl.F_WRLCK, "u": fcntl.F_UNLCK}
NAMES = {fcntl.F_RDLCK: "r", fcntl.F_WRLCK: "w", fcntl.F_UNLCK: "u"}


class Interrupted(Exception):
    pass


def on_usr1(signum, frame):
    raise Interrupted()


def flock_struct(typ, start, length, pid=0):
    # struct flock on 64-bit Linux: short type, short whence, off_t start,
    # off_t len, pid_t pid (32 bytes with padding).
    return struct.pack("@hhqqi", typ, 0, start, length, pid) + b"\0" * 4


def run(fd, words):
    cmd = words[0]
    if cmd == "open":
        return os.open(words[1], os.O_RDWR | os.O_CREAT, 0o644), "ok"
    if cmd == "pid":
        return fd, "ok %d" % os.getpid()
    if cmd == "flock":
        op = {"sh": fcntl.LOCK_SH, "ex": fcntl.LOCK_EX, "un": fcntl.LOCK_UN}[words[1]]
        if "nb" in words[2:]:
            op |= fcntl.LOCK_NB
        fcntl.flock(fd, op)
        return fd, "ok"
    if cmd in ("lock", "ofd"):
        typ, start, length = TYPES[words[1]], int(words[2]), int(words[3])
        nb = "nb" in words[4:]
        if cmd == "lock":
            op = fcntl.F_SETLK if nb else fcntl.F_SETLKW
        else:
            op = F_OFD_SETLK if nb else F_OFD_SETLKW
        fcntl.fcntl(fd, op, flock_struct(typ, start, length))
        return fd, "ok"
    if cmd == "getlk":
        typ, start, length = TYPES[words[1]], int(words[2]), int(words[3])
        out = fcntl.fcntl(fd, fcntl.F_GETLK, flock_struct(typ, start, length))
        t, _, s, l, p = struct.unpack("@hhqqi", out[:28])
        if t == fcntl.F_UNLCK:
            return fd, "ok unlocked"
        return fd, "ok %s %d %d %d" % (NAMES[t], s, l, p)
    if cmd == "write":
        data = " ".join(words[1:]).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        return fd, "ok"
    if cmd == "read":
        return fd, "ok " + os.pread(fd, 1 << 20, 0).decode()
    if cmd == "close":
        os.close(fd)
        return -1, "ok"
    return fd, "unknown command " + cmd


def interactive():
    signal.signal(signal.SIGUSR1, on_usr1)
    fd = -1
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "exit":
            break
        try:
            fd, answer = run(fd, words)
        except Interrupted:
            answer = "EINTR"
        except OSError as e:
            answer = errno.errorcode.get(e.errno, str(e.errno))
        print(answer, flush=True)


def sqlite_writer(db, rows, tag):
    conn = sqlite3.connect(db, timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    while True:
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, tag TEXT, n INTEGER, pad TEXT)")
            break
        except sqlite3.OperationalError:
            time.sleep(0.01)
    done = 0
    while done < rows:
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (tag, n, pad) VALUES (?, ?, ?)", (tag, done, "x" * 200))
            conn.execute("COMMIT")
            done += 1
        except sqlite3.OperationalError as e:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.OperationalError:
                pass
            if "locked" not in str(e) and "busy" not in str(e):
                print("error %s after %d rows" % (e, done), flush=True)
                return 1
            time.sleep(0.005)
        except sqlite3.DatabaseError as e:
            print("error %s after %d rows" % (e, done), flush=True)
            return 1
    conn.close()
    print("ok %d" % done, flush=True)
    return 0


def counter(path, n, kind="flock"):
    for _ in range(n):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if kind == "fcntl":
            fcntl.lockf(fd, fcntl.LOCK_EX)  # a POSIX lock of the whole file
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
        v = os.pread(fd, 64, 0).decode().strip()
        v = int(v) + 1 if v else 1
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(v).encode(), 0)
        os.close(fd)  # releases the lock, after publishing
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 1:
        interactive()
    elif sys.argv[1] == "sqlite":
        sys.exit(sqlite_writer(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    elif sys.argv[1] == "counter":
        sys.exit(counter(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5]))
    else:
        sys.exit("usage: lockclient.py [sqlite DB ROWS TAG | counter FILE N [flock|fcntl]]")
