package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
)

// TestFastMappedBodies: small bodies of a real store (memory-mapped
// volumes) leave lent from the maps with their head in one sendmsg, byte
// for byte right, one at a time and pipelined, whole and in ranges; large
// ones still leave with sendfile.
func TestFastMappedBodies(t *testing.T) {
	st := realStore(t)
	paths, data := realCorpus(t, st, 40)
	big := bytes.Repeat([]byte("fedcba9876543210"), 300<<10/16)
	_, _, err := st.Put(context.Background(), "pub", "big.bin", bytes.NewReader(big), store.PutOptions{Size: int64(len(big))})
	must(t, err)
	var srv *Server
	addr := realServer(t, st, nil, &srv)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	// One at a time, as wrk does; twice: the count is taken on the second
	// pass, and may miss one or two (under make test's load a read once
	// took the fallback, which serves the same bytes: 39 of 40 lent).
	var base int64
	for pass := range 2 {
		base = srv.fast.Counts().SentLent
		for _, p := range paths {
			fmt.Fprintf(c, "GET /pub/%s HTTP/1.1\r\nHost: x\r\n\r\n", p)
			resp, body := readResp(t, br, "GET")
			if resp.StatusCode != 200 || body != string(data[p]) {
				t.Fatalf("pass %d, %s: status %d, %d bytes, want 200 and %d bytes", pass, p, resp.StatusCode, len(body), len(data[p]))
			}
		}
	}
	if got := srv.fast.Counts().SentLent - base; got < int64(len(paths))-2 || got > int64(len(paths)) {
		t.Fatalf("%d of %d bodies lent from the maps", got, len(paths))
	}
	// Pipelined, with ranges and the large file in between.
	base = srv.fast.Counts().SentLent
	var all bytes.Buffer
	for _, p := range paths {
		fmt.Fprintf(&all, "GET /pub/%s HTTP/1.1\r\nHost: x\r\nRange: bytes=3-999\r\n\r\n", p)
		fmt.Fprintf(&all, "GET /pub/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		fmt.Fprintf(&all, "GET /pub/%s HTTP/1.1\r\nHost: x\r\n\r\n", p)
	}
	_, err = c.Write(all.Bytes())
	must(t, err)
	for _, p := range paths {
		resp, body := readResp(t, br, "GET")
		if resp.StatusCode != 206 || body != string(data[p][3:1000]) {
			t.Fatalf("%s range: status %d, %d bytes", p, resp.StatusCode, len(body))
		}
		resp, body = readResp(t, br, "GET")
		if resp.StatusCode != 200 || body != string(big) {
			t.Fatalf("big.bin: status %d, %d bytes", resp.StatusCode, len(body))
		}
		resp, body = readResp(t, br, "GET")
		if resp.StatusCode != 200 || body != string(data[p]) {
			t.Fatalf("%s: status %d, %d bytes", p, resp.StatusCode, len(body))
		}
	}
	// Each body leaves by the path its size asks for; under make test's
	// load a lend or a span may fall back for one of them (the same bytes
	// by ReadAt or the other path), never for many.
	mapped, file := srv.fast.Counts().SentLent-base, srv.fast.Counts().SentFile
	if n := int64(len(paths)); mapped < 2*n-2 || file < n-2 || mapped+file > 3*n {
		t.Fatalf("%d bodies lent from the maps (want %d) and %d sent with sendfile (want %d)", mapped, 2*n, file, n)
	}
}
