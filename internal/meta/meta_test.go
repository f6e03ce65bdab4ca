package meta

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cockroachdb/datadriven"
)

// env is the state of one datadriven script: a store, the next log index,
// and short names for blob hashes.
type env struct {
	t     testing.TB
	s     kv.Store
	index uint64
	names map[cas.Hash]string
}

func newEnv(t testing.TB) *env {
	return &env{t: t, s: kv.NewMem(), names: map[cas.Hash]string{}}
}

// hash maps a short name ("h1") to a blob hash and remembers the name.
func (e *env) hash(name string) cas.Hash {
	h := cas.Sum([]byte(name))
	e.names[h] = name
	return h
}

func (e *env) hname(h cas.Hash) string {
	if n, ok := e.names[h]; ok {
		return n
	}
	return h.String()[:8]
}

// args is a parsed script line: positional words and key=value pairs.
type args struct {
	pos []string
	kv  map[string]string
}

func parseLine(line string) (string, args) {
	f := strings.Fields(line)
	a := args{kv: map[string]string{}}
	if len(f) == 0 {
		return "", a
	}
	for _, w := range f[1:] {
		if k, v, ok := strings.Cut(w, "="); ok {
			a.kv[k] = strings.Trim(v, "()")
		} else if w == `""` {
			a.pos = append(a.pos, "")
		} else {
			a.pos = append(a.pos, w)
		}
	}
	return f[0], a
}

func (a args) arg(i int) string {
	if i < len(a.pos) {
		return a.pos[i]
	}
	return ""
}

func (a args) num(t testing.TB, k string) int64 {
	v, ok := a.kv[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

func (a args) has(k string) bool { _, ok := a.kv[k]; return ok || slices.Contains(a.pos, k) }

// command builds the Command for a mutating script verb at time now.
func (e *env) command(verb string, a args, now int64) (Command, bool) {
	c := Command{BucketName: a.arg(0), Path: a.arg(1), TimeNs: now, StartIndex: e.index}
	if a.has("start") {
		c.StartIndex = uint64(a.num(e.t, "start"))
	}
	c.IfMatch = a.kv["if-match"]
	c.IfNoneMatchAny = a.has("if-none-match")
	opts := func() *Bucket {
		return &Bucket{Name: a.arg(0), Public: a.has("public"), ChecksumSidecars: a.has("sidecars"), CacheControl: a.kv["cache"]}
	}
	file := func() *Inode {
		f := &Inode{Mode: uint32(a.num(e.t, "mode")), UID: uint32(a.num(e.t, "uid")), GID: uint32(a.num(e.t, "gid")),
			MtimeNs: a.num(e.t, "mtime"), ETag: a.kv["etag"], ContentType: a.kv["type"]}
		if tgt, ok := a.kv["symlink"]; ok {
			f.Type, f.Target, f.Size = TypeSymlink, tgt, int64(len(tgt))
		}
		if bl := a.kv["blobs"]; bl != "" {
			for _, part := range strings.Split(bl, ",") {
				name, l, _ := strings.Cut(part, ":")
				n, err := strconv.ParseInt(l, 10, 64)
				if err != nil {
					n = 10
				}
				f.Extents = append(f.Extents, Extent{Hash: e.hash(name), Offset: f.Size, Length: n})
				f.Size += n
			}
		}
		if a.has("size") {
			f.Size = a.num(e.t, "size")
		}
		if x := a.kv["xattr"]; x != "" {
			f.Xattrs = map[string][]byte{}
			for _, kv := range strings.Split(x, ",") {
				k, v, _ := strings.Cut(kv, ":")
				f.Xattrs[k] = []byte(v)
			}
		}
		return f
	}
	switch verb {
	case "bucket-create":
		c.Op, c.Bucket = OpCreateBucket, opts()
	case "bucket-update":
		c.Op, c.Bucket = OpUpdateBucket, opts()
	case "bucket-delete":
		c.Op = OpDeleteBucket
	case "put":
		c.Op, c.File = OpPutFile, file()
	case "mkdir":
		c.Op = OpMkdir
		if a.has("mode") {
			c.File = file()
		}
	case "rm":
		c.Op = OpDelete
	case "mv":
		c.Op, c.DstPath = OpRename, a.arg(2)
	case "setattr":
		c.Op, c.File = OpSetAttr, file()
	case "reap", "reap-orphans":
		c.Op = OpReapOrphans
		if verb == "reap" {
			c.Op, c.ReapBefore = OpReap, a.num(e.t, "before")
		}
		for _, n := range strings.Split(a.kv["blobs"], ",") {
			if n != "" {
				c.Reap = append(c.Reap, e.hash(n))
			}
		}
	default:
		return c, false
	}
	return c, true
}

// apply applies cmds as the next log entry, at time index*1000.
func (e *env) apply(cmds []Command) []Result {
	b := e.s.NewBatch()
	defer b.Close()
	e.index++
	// Round-trip through the log encoding, as the real path does.
	p, err := EncodeCommands(cmds)
	if err != nil {
		e.t.Fatal(err)
	}
	dec, err := DecodeCommands(p)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := Apply(b, e.index, dec)
	if err != nil {
		e.t.Fatalf("Apply: %v", err)
	}
	if err := b.Commit(false); err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *env) fmtResult(r Result) string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	var parts []string
	parts = append(parts, "ok")
	if r.Created {
		parts = append(parts, "created")
	}
	if r.Inode != nil {
		parts = append(parts, fmt.Sprintf("ino=%d", r.Inode.Ino))
	}
	if len(r.Changed) > 0 {
		parts = append(parts, "changed=["+strings.Join(r.Changed, " ")+"]")
	}
	if r.ChangedAll {
		parts = append(parts, "changed-all")
	}
	if len(r.Freed) > 0 {
		var f []string
		for _, h := range r.Freed {
			f = append(f, e.hname(h))
		}
		parts = append(parts, "freed=["+strings.Join(f, " ")+"]")
	}
	return strings.Join(parts, " ")
}

var typeNames = map[FileType]string{TypeFile: "file", TypeDir: "dir", TypeSymlink: "symlink"}

func (e *env) fmtInode(n *Inode) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d %s mode=%o uid=%d gid=%d nlink=%d size=%d mtime=%d ctime=%d",
		n.Ino, typeNames[n.Type], n.Mode, n.UID, n.GID, n.Nlink, n.Size, n.MtimeNs, n.CtimeNs)
	for _, kv := range [][2]string{{"type", n.ContentType}, {"etag", n.ETag}, {"sha256", n.SHA256}, {"target", n.Target}} {
		if kv[1] != "" {
			fmt.Fprintf(&sb, " %s=%s", kv[0], kv[1])
		}
	}
	if len(n.Extents) > 0 {
		var xs []string
		for _, x := range n.Extents {
			xs = append(xs, fmt.Sprintf("%s@%d+%d", e.hname(x.Hash), x.Offset, x.Length))
		}
		sb.WriteString(" extents=[" + strings.Join(xs, " ") + "]")
	}
	if len(n.Xattrs) > 0 {
		var xs []string
		for _, k := range slices.Sorted(mapsKeys(n.Xattrs)) {
			xs = append(xs, k+":"+string(n.Xattrs[k]))
		}
		sb.WriteString(" xattrs=[" + strings.Join(xs, " ") + "]")
	}
	return sb.String()
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dump prints every key of the store in a readable form.
func (e *env) dump(r kv.Reader) string {
	var sb strings.Builder
	err := r.Scan(nil, nil, func(k, v []byte) bool {
		var h cas.Hash
		switch k[0] {
		case pMeta:
			if string(k) == string(keyCounts) {
				fmt.Fprintf(&sb, "counts files=%d dirs=%d bytes=%d\n", int64(binary.BigEndian.Uint64(v)),
					int64(binary.BigEndian.Uint64(v[8:])), int64(binary.BigEndian.Uint64(v[16:])))
			} else {
				fmt.Fprintf(&sb, "%s %d\n", k[1:], binary.BigEndian.Uint64(v))
			}
		case pInode:
			n, err := DecodeInode(Ino(binary.BigEndian.Uint64(k[1:])), v)
			if err != nil {
				e.t.Fatal(err)
			}
			fmt.Fprintf(&sb, "inode %s\n", e.fmtInode(n))
		case pDentry:
			ino, t, err := decodeDentry(v)
			if err != nil {
				e.t.Fatal(err)
			}
			fmt.Fprintf(&sb, "dentry %d %q -> %d %s\n", binary.BigEndian.Uint64(k[1:]), k[9:], ino, typeNames[t])
		case pBucket:
			b, err := decodeBucket(v)
			if err != nil {
				e.t.Fatal(err)
			}
			fmt.Fprintf(&sb, "bucket %s ino=%d public=%t sidecars=%t cache=%q created=%d\n",
				b.Name, b.Ino, b.Public, b.ChecksumSidecars, b.CacheControl, b.CreatedNs)
		case pRef:
			copy(h[:], k[1:])
			fmt.Fprintf(&sb, "ref %s = %d\n", e.hname(h), binary.BigEndian.Uint64(v))
		case pGarbage:
			copy(h[:], k[9:])
			fmt.Fprintf(&sb, "garbage t=%d %s\n", unsortableTime(binary.BigEndian.Uint64(k[1:])), e.hname(h))
		case pGarbageH:
			copy(h[:], k[1:])
			fmt.Fprintf(&sb, "garbage-by-hash %s t=%d\n", e.hname(h), unsortableTime(binary.BigEndian.Uint64(v)))
		case pReaped:
			copy(h[:], k[1:])
			fmt.Fprintf(&sb, "reaped %s at=%d\n", e.hname(h), binary.BigEndian.Uint64(v))
		case pReapedI:
			copy(h[:], k[9:])
			fmt.Fprintf(&sb, "reaped-by-index %d %s\n", binary.BigEndian.Uint64(k[1:]), e.hname(h))
		default:
			fmt.Fprintf(&sb, "unknown %q = %q\n", k, v)
		}
		return true
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return sb.String()
}

// run executes one script line; entry lines are applied together.
func (e *env) run(line, input string) string {
	verb, a := parseLine(line)
	r := NewReader(e.s)
	if c, ok := e.command(verb, a, int64(e.index+1)*1000); ok {
		return e.fmtResult(e.apply([]Command{c})[0])
	}
	switch verb {
	case "entry": // each input line is one command of a single log entry
		var cmds []Command
		for _, l := range strings.Split(strings.TrimSpace(input), "\n") {
			v, la := parseLine(l)
			c, ok := e.command(v, la, int64(e.index+1)*1000)
			if !ok {
				e.t.Fatalf("entry: unknown command %q", l)
			}
			cmds = append(cmds, c)
		}
		var out []string
		for _, res := range e.apply(cmds) {
			out = append(out, e.fmtResult(res))
		}
		return strings.Join(out, "\n")
	case "lookup":
		n, err := r.Lookup(a.arg(0), a.arg(1))
		if err != nil {
			return "error: " + err.Error()
		}
		return e.fmtInode(n)
	case "ls":
		dir, err := r.Lookup(a.arg(0), a.arg(1))
		if err != nil {
			return "error: " + err.Error()
		}
		ents, err := r.ReadDir(dir.Ino, a.kv["after"], int(a.num(e.t, "limit")))
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, d := range ents {
			out = append(out, fmt.Sprintf("%s %d %s", DirentKeyName(d), d.Ino, typeNames[d.Type]))
		}
		return strings.Join(out, "\n")
	case "buckets":
		bs, err := r.Buckets()
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, b := range bs {
			out = append(out, fmt.Sprintf("%s ino=%d public=%t", b.Name, b.Ino, b.Public))
		}
		return strings.Join(out, "\n")
	case "refcount":
		rc, err := r.RefCount(e.hash(a.arg(0)))
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprint(rc)
	case "garbage":
		g, err := r.Garbage(a.num(e.t, "before"), int(a.num(e.t, "limit")))
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, x := range g {
			out = append(out, fmt.Sprintf("%s t=%d", e.hname(x.Hash), x.TimeNs))
		}
		return strings.Join(out, "\n")
	case "counts":
		f, d, b, err := r.Counts()
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("files=%d dirs=%d bytes=%d", f, d, b)
	case "skip": // advance the log index without commands
		e.index += uint64(a.num(e.t, "n"))
		return fmt.Sprintf("index=%d", e.index)
	case "dump":
		return e.dump(e.s)
	}
	e.t.Fatalf("unknown command %q", line)
	return ""
}

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := newEnv(t)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			e.t = t
			line := td.Cmd
			for _, a := range td.CmdArgs {
				switch len(a.Vals) {
				case 0:
					line += " " + a.Key
				default:
					line += " " + a.Key + "=" + strings.Join(a.Vals, ",")
				}
			}
			out := e.run(line, td.Input)
			if out == "" {
				out = "(empty)"
			}
			return out + "\n"
		})
	})
}
