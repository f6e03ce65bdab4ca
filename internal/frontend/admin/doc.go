// Package admin holds the parts of the node's admin surface that need no
// cluster state: the embedded admin page (page.go, ui/), the in-process
// metrics history the page charts (history.go), and the ring of recent
// warnings and errors (logring.go). internal/node wires them to the
// node's metrics, logger and admin key (internal/node/ui.go).
//
// Invariants:
//   - The page is static: plain HTML, CSS and JavaScript embedded with
//     go:embed, no build step and no external resource. Every byte of data
//     it shows comes from admin-key endpoints, fetched with the key in the
//     Authorization header; the key is never put in a URL.
//   - The history is computed from the node's own counters: a Sampler reads
//     cumulative counts every Interval and keeps the differences of the
//     last Window. It never scrapes another node or service.
//   - The log ring keeps at most its size in records; a record is copied
//     (message and attributes as strings) when logged, so later changes of
//     the logged values do not show.
package admin
