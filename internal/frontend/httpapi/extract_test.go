package httpapi

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/store"
)

type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func makeTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o640
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link,
			ModTime: time.Unix(1_650_000_000, 0), Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		must(t, tw.WriteHeader(h))
		if typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

func decodeExtract(t *testing.T, w io.Reader) ExtractResult {
	t.Helper()
	var res ExtractResult
	must(t, json.NewDecoder(w).Decode(&res))
	return res
}

// A tar archive lands under the prefix: files with their mode and mtime,
// empty directories, a repeated path's later content; symlinks and
// devices are skipped and listed; a "../" entry fails alone.
func testExtract(t *testing.T, st store.Store, fs func(path string) (string, store.ObjectInfo, error)) {
	big := strings.Repeat("0123456789abcdef", (blob.MaxSize+100)/16) // streamed with Put
	entries := []tarEntry{
		{name: "./", typ: tar.TypeDir},
		{name: "./index.html", body: "<h1>home</h1>", mode: 0o600},
		{name: "./css/", typ: tar.TypeDir},
		{name: "./css/site.css", body: "body{}"},
		{name: "./empty-dir/", typ: tar.TypeDir},
		{name: "./big.bin", body: big},
		{name: "./link", typ: tar.TypeSymlink, link: "index.html"},
		{name: "./dev", typ: tar.TypeChar},
		{name: "../escape", body: "no"},
		{name: "./twice.txt", body: "first"},
		{name: "./empty.txt", body: ""},
		{name: "./twice.txt", body: "second"},
	}
	for i := range 600 { // more than one group
		entries = append(entries, tarEntry{name: fmt.Sprintf("many/f%03d.txt", i), body: fmt.Sprint("file ", i)})
	}
	srvURL := realServer(t, st, nil, nil)
	req, err := http.NewRequest("POST", "http://"+strings.TrimPrefix(srvURL, "http://")+"/pub/site/?extract=tar", bytes.NewReader(makeTar(t, entries)))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	res := decodeExtract(t, resp.Body)
	if resp.StatusCode != 400 || res.Code != "InvalidPath" {
		t.Fatalf("status %d, result %+v: want 400 InvalidPath (the ../ entry)", resp.StatusCode, res)
	}
	if res.Files != 606 || res.Failed != 1 || res.Skipped != 2 || res.Dirs != 1 {
		t.Fatalf("result %+v", res)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Path, "escape") || res.Errors[0].Code != "InvalidPath" {
		t.Fatalf("errors %+v", res.Errors)
	}
	if len(res.SkippedItems) != 2 || res.SkippedItems[0].Reason != "symlink" || res.SkippedItems[1].Reason != "device" {
		t.Fatalf("skipped %+v", res.SkippedItems)
	}
	for p, want := range map[string]string{"site/index.html": "<h1>home</h1>", "site/css/site.css": "body{}",
		"site/big.bin": big, "site/twice.txt": "second", "site/empty.txt": "", "site/many/f599.txt": "file 599"} {
		got, info, err := fs(p)
		if err != nil || got != want {
			t.Fatalf("%s: %v, %d bytes (want %d)", p, err, len(got), len(want))
		}
		if p == "site/index.html" && (info.Mode != 0o600 || info.ModTime.Unix() != 1_650_000_000) {
			t.Fatalf("mode/mtime not kept: %+v", info)
		}
	}
	if info, err := st.Stat(context.Background(), "pub", "site/empty-dir"); err != nil || !info.IsDir {
		t.Fatalf("empty directory: %+v %v", info, err)
	}
	if _, err := st.Stat(context.Background(), "pub", "site/link"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("symlink stored: %v", err)
	}
}

func TestExtractRealStore(t *testing.T) {
	st := realStore(t)
	testExtract(t, st, reader(st))
}

// A store without PutFiles gets one Put per file.
func TestExtractWithoutBatchPutter(t *testing.T) {
	e := newEnv(t, nil)
	var st store.Store = e.fs
	if _, ok := st.(store.BatchPutter); ok {
		t.Fatal("the fake store has PutFiles: this test needs one without")
	}
	testExtract(t, st, reader(st))
}

// reader reads a whole file of bucket pub of st.
func reader(st store.Store) func(p string) (string, store.ObjectInfo, error) {
	return func(p string) (string, store.ObjectInfo, error) {
		o, err := st.Open(context.Background(), "pub", p)
		if err != nil {
			return "", store.ObjectInfo{}, err
		}
		var b bytes.Buffer
		_, err = o.WriteRangeTo(&b, 0, o.Info().Size)
		return b.String(), o.Info(), err
	}
}

func TestExtractRequests(t *testing.T) {
	st := realStore(t)
	e := newEnv(t, func(c *Config) { c.Store = st })
	ok := makeTar(t, []tarEntry{{name: "a.txt", body: "a"}, {name: "d/b.txt", body: "b"}})

	// Authentication first, then the bucket, then the archive.
	expect(t, e.do("POST", "/pub/?extract=tar", bytes.NewReader(ok)), 401, "Unauthorized")
	expect(t, e.do("POST", "/nobucket/?extract=tar", bytes.NewReader(ok), "key: admin"), 404, "NoSuchBucket")
	expect(t, e.do("POST", "/pub/?extract=zip", bytes.NewReader(ok), "key: admin"), 400, "BadRequest")
	expect(t, e.do("POST", "/pub/?extract=tar&extract=tar", bytes.NewReader(ok), "key: admin"), 400, "BadRequest")

	// The bucket's root, then a prefix without a trailing slash.
	w := e.do("POST", "/pub/?extract=tar", bytes.NewReader(ok), "key: admin")
	if res := decodeExtract(t, w.Body); w.Code != 200 || res.Files != 2 || res.Bytes != 2 || res.Failed != 0 {
		t.Fatalf("%d %+v", w.Code, res)
	}
	w = e.do("POST", "/pub/x/y?extract=tar", bytes.NewReader(ok), "key: admin")
	if res := decodeExtract(t, w.Body); w.Code != 200 || res.Files != 2 {
		t.Fatalf("%d %+v", w.Code, res)
	}
	for _, p := range []string{"a.txt", "d/b.txt", "x/y/a.txt", "x/y/d/b.txt"} {
		if _, err := st.Stat(context.Background(), "pub", p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}

	// gzip.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(makeTar(t, []tarEntry{{name: "z.txt", body: "zipped"}}))
	must(t, zw.Close())
	w = e.do("POST", "/pub/?extract=tar.gz", bytes.NewReader(gz.Bytes()), "key: admin")
	if res := decodeExtract(t, w.Body); w.Code != 200 || res.Files != 1 {
		t.Fatalf("gzip: %d %+v", w.Code, res)
	}
	expect(t, e.do("POST", "/pub/?extract=tar.gz", bytes.NewReader(ok), "key: admin"), 400, "BadRequest")

	// A cut archive: what came before the cut is stored and counted.
	many := makeTar(t, []tarEntry{{name: "c1", body: "1"}, {name: "c2", body: strings.Repeat("2", 5000)}})
	w = e.do("POST", "/pub/?extract=tar", bytes.NewReader(many[:2000]), "key: admin")
	res := decodeExtract(t, w.Body)
	if w.Code != 400 || res.Code != "BadArchive" || res.Files != 1 || res.Error == "" {
		t.Fatalf("cut archive: %d %+v", w.Code, res)
	}
	if _, err := st.Stat(context.Background(), "pub", "c1"); err != nil {
		t.Fatalf("the file before the cut: %v", err)
	}
	if _, err := st.Stat(context.Background(), "pub", "c2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the cut file: %v", err)
	}
	// Garbage.
	w = e.do("POST", "/pub/?extract=tar", strings.NewReader(strings.Repeat("not a tar ", 100)), "key: admin")
	if res := decodeExtract(t, w.Body); w.Code != 400 || res.Code != "BadArchive" || res.Files != 0 {
		t.Fatalf("garbage: %d %+v", w.Code, res)
	}
	// A file over a directory fails alone, with the store's status.
	w = e.do("POST", "/pub/?extract=tar", bytes.NewReader(makeTar(t, []tarEntry{{name: "d", body: "clash"}, {name: "e", body: "fine"}})), "key: admin")
	res = decodeExtract(t, w.Body)
	if w.Code != 409 || res.Files != 1 || res.Failed != 1 || res.Errors[0].Path != "d" || res.Errors[0].Status != 409 {
		t.Fatalf("clash: %d %+v", w.Code, res)
	}
}

// An upload whose body takes longer to arrive than WriteTimeout still gets
// its answer: the write deadline runs from the answer, not the request.
func TestSlowUploadGetsItsAnswer(t *testing.T) {
	st := realStore(t)
	addr := realServer(t, st, func(c *Config) { c.WriteTimeout, c.ReadTimeout = 200*time.Millisecond, 2*time.Second }, nil)
	for _, target := range []string{"/pub/slow.txt", "/pub/?extract=tar"} {
		body := []byte("0123456789")
		ctype := "text/plain"
		if strings.Contains(target, "extract") {
			body = makeTar(t, []tarEntry{{name: "slow2.txt", body: "0123456789"}})
			ctype = "application/x-tar"
		}
		method := "PUT"
		if strings.Contains(target, "extract") {
			method = "POST"
		}
		c, err := net.Dial("tcp", addr)
		must(t, err)
		must(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			method, target, testKey, ctype, len(body))
		// The body in 5 pieces over about 3 write timeouts.
		for i := range 5 {
			piece := body[i*len(body)/5 : (i+1)*len(body)/5]
			_, err := c.Write(piece)
			must(t, err)
			time.Sleep(120 * time.Millisecond)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s %s: no answer after a slow body: %v", method, target, err)
		}
		out, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, target, resp.StatusCode, out)
		}
	}
}
