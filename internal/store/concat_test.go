package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
)

func TestConcat(t *testing.T) {
	s := newEnv(t).s
	ctx := context.Background()
	parts := [][]byte{bytes.Repeat([]byte("a"), blob.MaxSize+10), []byte("hello "), {}, []byte("world")}
	var refs []ObjectRef
	var all []byte
	for i, p := range parts {
		name := ".parts/" + string(rune('0'+i))
		if _, _, err := s.Put(ctx, "bkt", name, bytes.NewReader(p), PutOptions{Size: int64(len(p))}); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ObjectRef{Bucket: "bkt", Path: name})
		all = append(all, p...)
	}
	x := map[string][]byte{"user.cairn.content-disposition": []byte("attachment")}
	info, created, err := s.Concat(ctx, "bkt", "big", refs, "abc-4", PutOptions{ContentType: "text/plain", Xattrs: x})
	if err != nil || !created {
		t.Fatal(err, created)
	}
	sum := sha256.Sum256(all)
	if info.Size != int64(len(all)) || info.ETag != "abc-4" || info.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("info %+v", info)
	}
	// The sources can go: the new file holds references of its own.
	for _, r := range refs {
		if err := s.Delete(ctx, "bkt", r.Path, ""); err != nil {
			t.Fatal(err)
		}
	}
	o, err := s.Open(ctx, "bkt", "big")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Info().Size))
	if err != nil || !bytes.Equal(got, all) {
		t.Fatalf("content differs (%d bytes, %v)", len(got), err)
	}
	if string(o.Info().Xattrs["user.cairn.content-disposition"]) != "attachment" || o.Info().ContentType != "text/plain" {
		t.Fatalf("attributes: %+v", o.Info())
	}
	if _, _, err := s.Concat(ctx, "bkt", "again", refs, "x", PutOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing source: %v", err)
	}
}

// TestPutContentMD5: a body whose MD5 is not the declared one is refused
// before anything is stored.
func TestPutContentMD5(t *testing.T) {
	s := newEnv(t).s
	ctx := context.Background()
	body := []byte("hello")
	good := md5.Sum(body)
	if _, _, err := s.Put(ctx, "bkt", "ok", bytes.NewReader(body), PutOptions{Size: 5, ContentMD5: good[:]}); err != nil {
		t.Fatal(err)
	}
	bad := md5.Sum([]byte("other"))
	if _, _, err := s.Put(ctx, "bkt", "bad", bytes.NewReader(body), PutOptions{Size: 5, ContentMD5: bad[:]}); !errors.Is(err, ErrBadDigest) {
		t.Fatalf("wrong MD5: %v", err)
	}
	if _, err := s.Stat(ctx, "bkt", "bad"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused body was stored: %v", err)
	}
}
