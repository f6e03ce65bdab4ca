// Package sdnotify tells systemd how a node started as a Type=notify
// service is doing: READY=1 once it serves, WATCHDOG=1 while it is alive,
// STOPPING=1 when it shuts down, and STATUS= lines that `systemctl status`
// shows.
//
// The protocol (sd_notify(3)) is one datagram per message on the unix
// socket named by NOTIFY_SOCKET (a name starting with '@' is an abstract
// socket); the watchdog interval, WatchdogSec= of the unit, comes in
// WATCHDOG_USEC, for the process named by WATCHDOG_PID. Sending is
// go-systemd's daemon.SdNotify. Outside systemd (no NOTIFY_SOCKET) every
// call does nothing.
//
// Invariants:
//   - READY=1 is sent only after the node's own liveness check (Config.Alive,
//     an HTTP request to its public listener) has succeeded, so `systemctl
//     start` returns when the node answers requests, not merely when its
//     process runs.
//   - After READY=1, WATCHDOG=1 is sent only right after a liveness check
//     that succeeded within the check timeout. A node that hangs stops the
//     pings, and systemd kills it (WatchdogSignal, SIGABRT: Go prints every
//     goroutine's stack to the journal) and restarts it (Restart=on-failure)
//     once WatchdogSec passes without one.
//   - Before READY=1 the pings are unconditional: systemd arms the
//     watchdog at the start, and a start that takes long (a volume scan
//     after a crash, a join) is bounded by TimeoutStartSec instead.
//   - After Stopping, nothing more is sent.
package sdnotify
