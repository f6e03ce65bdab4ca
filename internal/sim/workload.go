package sim

import (
	"bytes"
	"context"

	"github.com/cairn-fs/cairn/internal/store"
)

// ---------------------------------------------------------------------------
// Workload

// runOp starts a workload operation through node e.node, unless the node
// is down or paused (a client would not reach it).
func (s *Sim) runOp(e event) {
	n := s.byID[e.node]
	inc := n.inc
	if inc == nil || s.paused(n.id) {
		return
	}
	key := e.bucket + "/" + e.path
	var body []byte
	var w *write
	switch e.kind {
	case evPut:
		body = e.body.bytes()
		w = s.hist.begin(n.id, key, hashHex(body))
	case evDelete:
		w = s.hist.begin(n.id, key, absent)
	}
	s.ops.Add(1)
	s.inOps.Add(1)
	started := inc.goUse(func() {
		defer func() { s.inOps.Add(-1); s.ops.Done(); s.done.Add(1) }()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		switch e.kind {
		case evPut:
			var err error
			if e.body.bulk() {
				// A one-file bulk upload (PutFiles: WriteMany, then the
				// same command as Put), chosen by the content so that the
				// schedules of existing seeds stay the same.
				err = inc.st.PutFiles(ctx, e.bucket, []store.FilePut{{Path: e.path, Data: body}})[0].Err
			} else {
				_, _, err = inc.st.Put(ctx, e.bucket, e.path, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
			}
			s.hist.end(w, err)
			s.tr.add("put %s via %d: %v", key, n.id, err)
		case evDelete:
			err := inc.st.Delete(ctx, e.bucket, e.path, "")
			s.hist.end(w, err)
			s.tr.add("delete %s via %d: %v", key, n.id, err)
		case evRead:
			s.checkRead(ctx, inc, key, e.bucket, e.path, e.at%2 == 1) // half are consistent reads
		}
	})
	if !started { // cannot happen: a running node is not stopping
		s.inOps.Add(-1)
		s.ops.Done()
		s.fail("operation %v not started on a running node", e)
	}
}
