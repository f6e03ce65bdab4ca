// Package admin is the admin front end: the admin HTTP API under
// /_cairn/ (cluster members, status, scrub, mounts, access keys, abuse
// rules, bucket usage, the buckets' trash, the request history and recent
// warnings) and the embedded admin page at /_cairn/ui (docs/http-api.md,
// docs/admin-ui.md).
// The node mounts Handler.Routes on its public listener, beside the
// native API (httpapi's ExtraHandlers).
//
// It owns the admin API's handlers and their one error table (errors.go:
// error → status and code, in the JSON error format of httpapi), the page
// (page.go, ui/), the in-process history of the request metrics the page
// charts (history.go), and the ring of recent warnings and errors the
// node's logger writes through (logring.go).
//
// It works over interfaces it declares (api.go): the namespace through
// the store API (Store: buckets, listings, store.Records, the lock table,
// the directory owners counted per node, store.Trash), this node's own
// state (Local: status report, scrub, mounts, the directories it owns) and the cluster (Cluster: the cluster map, Raft's configuration
// and status, membership changes, calls to other members). internal/node
// implements Local and Cluster and converts its types to the ones
// declared here.
//
// It must not import anything of Cairn but internal/store,
// internal/access and other front ends (test/deps): no meta, consensus,
// blob or node; cluster operations go through Cluster, namespace data
// through Store. It holds no state that outlives the process but the
// records it writes through the store.
//
// Invariants:
//   - Every endpoint but the page needs the admin key; it is authorized
//     before anything else (a lone node answers /_cairn/nodes 401 before
//     501). A key's secret is shown once, in its creation's answer, and
//     never logged.
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
//   - A 5xx answer's message is generic; the error is logged.
package admin
