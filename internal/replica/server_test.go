package replica

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// PutBlobs on a blob.Store goes through PutMany: one error per blob, a
// duplicate inside the batch and a blob already stored succeed, a blob
// over blob.MaxSize fails alone, and every acknowledged blob reads back.
func TestBlobServerPutBlobsBatch(t *testing.T) {
	bs, err := blob.Open(blob.Config{Dir: "/b", FS: vfs.NewMem(), MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	mk := func(i int) transport.BlobPut {
		d := bytes.Repeat([]byte{byte(i)}, 100+i)
		return transport.BlobPut{Hash: blob.Sum(d), Data: d}
	}
	if err := bs.Put(mk(1).Hash, mk(1).Data); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, blob.MaxSize+1)
	puts := []transport.BlobPut{mk(1), mk(2), mk(3), mk(2), {Hash: blob.Sum(big), Data: big}, mk(4)}
	errs := BlobServer{bs}.PutBlobs(context.Background(), 2, puts)
	if len(errs) != len(puts) {
		t.Fatalf("%d errors for %d blobs", len(errs), len(puts))
	}
	for i, err := range errs {
		if i == 4 {
			if !errors.Is(err, blob.ErrTooLarge) {
				t.Fatalf("too large blob: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("blob %d: %v", i, err)
		}
		got, err := bs.Get(puts[i].Hash, nil)
		if err != nil || !bytes.Equal(got, puts[i].Data) {
			t.Fatalf("blob %d read back: %v", i, err)
		}
	}
	if n := bs.Stats().Blobs; n != 4 {
		t.Fatalf("%d blobs stored, want 4", n)
	}
}
