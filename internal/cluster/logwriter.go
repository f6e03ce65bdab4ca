package cluster

import (
	"bytes"
	"context"
	"log/slog"
)

// logWriter turns memberlist's log.Logger lines ("[LEVEL] memberlist:
// message") into slog records at Debug. memberlist logs every failed probe,
// push/pull and gossip send while a peer is down, several lines a second;
// the detector reports what an operator needs (joins, deaths, leaves,
// join failures, ID conflicts) itself at Info and Warn.
type logWriter struct {
	log *slog.Logger
}

// Write logs one line. log.Logger calls it once per line, serialized.
func (w *logWriter) Write(p []byte) (int, error) {
	ctx := context.Background()
	if !w.log.Enabled(ctx, slog.LevelDebug) {
		return len(p), nil
	}
	line := bytes.TrimRight(p, "\n")
	level := ""
	if len(line) > 0 && line[0] == '[' {
		if i := bytes.IndexByte(line, ']'); i > 0 {
			level = string(line[1:i])
			line = bytes.TrimLeft(line[i+1:], " ")
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.log.Log(ctx, slog.LevelDebug, string(line), "memberlist_level", level)
	return len(p), nil
}
