package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cairn-fs/cairn/internal/cas"
)

// ErrCorrupt is returned when a stored value or a log payload cannot be
// decoded. It means a bug or disk corruption, never a user error.
var ErrCorrupt = errors.New("meta: corrupt encoding")

func errCorrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Encoding versions (first byte of each value).
const (
	inodeVersion   = 2  // 2: + atime (1 is still read)
	bucketVersion  = 6  // 2: + replicas, write quorum; 3: + strict; 4: + uid, gid, file and dir mode; 5: + owner, acl; 6: + trash retention, written only when set (2 to 5 are still read)
	commandVersion = 15 // 15: node state NodeClient (no new field); 14: OpFenceBucket (no new field); 13: + right (lock rights); 12: special files (no new field: a device's inode body ends with its number); 11: + own, exclusive; 2: + node (cluster map); 3: + under, replicated; 4: bucket bodies of version 4; 5: + count; 6: inode bodies with atime; 7: + record, whether the file's xattrs were given; 8: + lock; 9: + upgrade; 10: + origin, trash, bucket bodies of version 6 (2 to 9 are still read)
	// lockFreeVersion is the version written for a payload without a lock
	// command: the same bytes as version 7, which binaries from before
	// locks can still decode, so that a rolling upgrade only depends on
	// the cluster's log version (version.go) for newer commands.
	lockFreeVersion = 7
	nodeVersion     = 1
	recordVersion   = 1
)

// Limits enforced by the decoders, so that a corrupt length cannot make
// them allocate unbounded memory.
const (
	maxString   = 1 << 20
	maxExtents  = 1 << 22
	maxXattrs   = 1 << 16
	maxCommands = 1 << 20
	maxReap     = 1 << 20
)

type encoder struct{ b []byte }

func (e *encoder) byte1(v byte)     { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) hash(h cas.Hash)  { e.b = append(e.b, h[:]...) }
func (e *encoder) bool1(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = errCorrupt(format, args...)
	}
}

func (d *decoder) byte1() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool1() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bad bool")
		return false
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail("uint32 overflow")
		return 0
	}
	return uint32(v)
}

func (d *decoder) count(limit uint64) int {
	n := d.uvarint()
	if n > limit || n > uint64(len(d.b)) { // each item takes at least one byte
		d.fail("count %d too large", n)
		return 0
	}
	return int(n)
}

func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > maxString || n > uint64(len(d.b)) {
		d.fail("length %d exceeds input", n)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) hash() cas.Hash {
	var h cas.Hash
	if d.err != nil {
		return h
	}
	if len(d.b) < len(h) {
		d.fail("truncated hash")
		return h
	}
	copy(h[:], d.b)
	d.b = d.b[len(h):]
	return h
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// appendInodeBody encodes every field of n except Ino (the key holds it).
func appendInodeBody(e *encoder, n *Inode) {
	e.byte1(byte(n.Type))
	e.uvarint(uint64(n.Mode))
	e.uvarint(uint64(n.UID))
	e.uvarint(uint64(n.GID))
	e.uvarint(uint64(n.Nlink))
	e.varint(n.Size)
	e.varint(n.MtimeNs)
	e.varint(n.CtimeNs)
	e.str(n.ContentType)
	e.str(n.ETag)
	e.str(n.SHA256)
	e.str(n.Target)
	e.uvarint(uint64(len(n.Extents)))
	for _, x := range n.Extents {
		e.hash(x.Hash)
		e.varint(x.Offset)
		e.varint(x.Length)
	}
	keys := make([]string, 0, len(n.Xattrs))
	for k := range n.Xattrs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // map order must not leak into the bytes
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.bytes(n.Xattrs[k])
	}
	e.varint(n.AtimeNs)
	if n.Type.Device() { // only devices carry it: no older body changes
		e.uvarint(uint64(n.Rdev))
	}
}

// decodeInodeBody decodes what appendInodeBody wrote; atime: the body has
// the access time (inode version 2, command version 6).
func decodeInodeBody(d *decoder, n *Inode, atime bool) {
	n.Type = FileType(d.byte1())
	n.Mode = d.u32()
	n.UID = d.u32()
	n.GID = d.u32()
	n.Nlink = d.u32()
	n.Size = d.varint()
	n.MtimeNs = d.varint()
	n.CtimeNs = d.varint()
	n.ContentType = d.str()
	n.ETag = d.str()
	n.SHA256 = d.str()
	n.Target = d.str()
	if ne := d.count(maxExtents); ne > 0 {
		n.Extents = make([]Extent, ne)
		for i := range n.Extents {
			n.Extents[i] = Extent{Hash: d.hash(), Offset: d.varint(), Length: d.varint()}
		}
	}
	if nx := d.count(maxXattrs); nx > 0 {
		n.Xattrs = make(map[string][]byte, nx)
		prev := ""
		for i := 0; i < nx && d.err == nil; i++ {
			k := d.str()
			if i > 0 && k <= prev {
				d.fail("xattr keys not sorted")
			}
			prev = k
			n.Xattrs[k] = slices.Clone(d.raw())
		}
	}
	if atime {
		n.AtimeNs = d.varint()
		if n.Type.Device() { // written by version 12 and later only
			n.Rdev = d.u32()
		}
	}
}

// EncodeInode returns the stored form of n (without n.Ino, which is the
// key). Deterministic: xattrs are written in key order.
func EncodeInode(n *Inode) []byte {
	e := encoder{b: make([]byte, 0, 64+len(n.Extents)*40)}
	e.byte1(inodeVersion)
	appendInodeBody(&e, n)
	return e.b
}

// DecodeInode decodes a value written by EncodeInode, setting Ino to ino.
// Errors wrap ErrCorrupt. The result does not alias p.
func DecodeInode(ino Ino, p []byte) (*Inode, error) {
	d := decoder{b: p}
	v := d.byte1()
	if d.err == nil && v != inodeVersion && v != 1 {
		return nil, errCorrupt("inode version %d", v)
	}
	n := &Inode{Ino: ino}
	decodeInodeBody(&d, n, v >= 2)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode inode %d: %w", ino, err)
	}
	return n, nil
}

// bucketBodyVersion is the lowest bucket body version that holds b, so
// that a binary from before a field was added still reads the buckets
// that do not use it (a downgrade before the log version moved).
func bucketBodyVersion(b *Bucket) byte {
	if b.TrashNs != 0 {
		return 6
	}
	return 5
}

// appendBucket writes b's body: version 5 fields, then those of v6.
func appendBucket(e *encoder, b *Bucket, version byte) {
	e.str(b.Name)
	e.uvarint(uint64(b.Ino))
	e.bool1(b.Public)
	e.bool1(b.ChecksumSidecars)
	e.str(b.CacheControl)
	e.varint(b.CreatedNs)
	e.varint(int64(b.Replicas))
	e.varint(int64(b.WriteQuorum))
	e.bool1(b.Strict)
	e.uvarint(uint64(b.UID))
	e.uvarint(uint64(b.GID))
	e.uvarint(uint64(b.FileMode))
	e.uvarint(uint64(b.DirMode))
	e.str(b.Owner)
	e.str(b.ACL)
	if version >= 6 {
		e.varint(b.TrashNs)
	}
}

// decodeBucketBody decodes a bucket body of the given version (2 or 3).
func decodeBucketBody(d *decoder, version byte) *Bucket {
	b := &Bucket{
		Name:             d.str(),
		Ino:              Ino(d.uvarint()),
		Public:           d.bool1(),
		ChecksumSidecars: d.bool1(),
		CacheControl:     d.str(),
		CreatedNs:        d.varint(),
		Replicas:         int32(d.varint()),
		WriteQuorum:      int32(d.varint()),
	}
	if version >= 3 {
		b.Strict = d.bool1()
	}
	if version >= 4 {
		b.UID, b.GID = uint32(d.uvarint()), uint32(d.uvarint())
		b.FileMode, b.DirMode = uint32(d.uvarint()), uint32(d.uvarint())
	}
	if version >= 5 {
		b.Owner, b.ACL = d.str(), d.str()
	}
	if version >= 6 {
		b.TrashNs = d.varint()
	}
	return b
}

func appendNode(e *encoder, n *Node) {
	e.uvarint(n.ID)
	e.str(n.Name)
	e.str(n.URL)
	e.str(n.ClusterURL)
	e.str(n.Zone)
	e.uvarint(math.Float64bits(n.Weight))
	e.bool1(n.Witness)
	e.byte1(byte(n.State))
	e.varint(n.JoinedNs)
	e.str(n.GossipAddr)
}

func decodeNodeBody(d *decoder) *Node {
	return &Node{
		ID:         d.uvarint(),
		Name:       d.str(),
		URL:        d.str(),
		ClusterURL: d.str(),
		Zone:       d.str(),
		Weight:     math.Float64frombits(d.uvarint()),
		Witness:    d.bool1(),
		State:      NodeState(d.byte1()),
		JoinedNs:   d.varint(),
		GossipAddr: d.str(),
	}
}

func encodeNode(n *Node) []byte {
	e := encoder{}
	e.byte1(nodeVersion)
	appendNode(&e, n)
	return e.b
}

func decodeNode(p []byte) (*Node, error) {
	d := decoder{b: p}
	if v := d.byte1(); d.err == nil && v != nodeVersion {
		return nil, errCorrupt("node version %d", v)
	}
	n := decodeNodeBody(&d)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode node: %w", err)
	}
	return n, nil
}

func encodeBucket(b *Bucket) []byte {
	e := encoder{}
	v := bucketBodyVersion(b)
	e.byte1(v)
	appendBucket(&e, b, v)
	return e.b
}

func decodeBucket(p []byte) (*Bucket, error) {
	d := decoder{b: p}
	v := d.byte1()
	if d.err == nil && (v < 2 || v > bucketVersion) {
		return nil, errCorrupt("bucket version %d", v)
	}
	b := decodeBucketBody(&d, v)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode bucket: %w", err)
	}
	return b, nil
}

func appendHashes(e *encoder, hs []cas.Hash) {
	e.uvarint(uint64(len(hs)))
	for _, h := range hs {
		e.hash(h)
	}
}

func decodeHashes(d *decoder) []cas.Hash {
	n := d.count(maxReap)
	if n == 0 {
		return nil
	}
	hs := make([]cas.Hash, n)
	for i := range hs {
		hs[i] = d.hash()
	}
	return hs
}

// EncodeCommands returns the log entry payload for cmds: deterministic (the
// same commands give the same bytes) and versioned. It fails only for an
// unknown Op. Safe for concurrent use.
func EncodeCommands(cmds []Command) ([]byte, error) {
	e := encoder{}
	version := payloadVersion(cmds) // version.go
	if version > commandVersion {
		return nil, fmt.Errorf("encode commands: %w: log version %d", ErrInvalid, version)
	}
	e.byte1(version)
	e.uvarint(uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		if c.Op < OpCreateBucket || c.Op > opLast {
			return nil, fmt.Errorf("encode command %d: %w: unknown op %d", i, ErrInvalid, c.Op)
		}
		e.byte1(byte(c.Op))
		e.str(c.BucketName)
		e.str(c.Path)
		e.str(c.DstPath)
		e.bool1(c.Bucket != nil)
		if c.Bucket != nil {
			appendBucket(&e, c.Bucket, commandBucketVersion(version))
		}
		e.bool1(c.File != nil)
		if c.File != nil {
			e.uvarint(uint64(c.File.Ino))
			appendInodeBody(&e, c.File)
		}
		e.varint(c.TimeNs)
		e.str(c.IfMatch)
		e.bool1(c.IfNoneMatchAny)
		e.uvarint(c.StartIndex)
		appendHashes(&e, c.Reap)
		e.varint(c.ReapBefore)
		e.bool1(c.Node != nil)
		if c.Node != nil {
			appendNode(&e, c.Node)
		}
		appendHashes(&e, c.Under)
		appendHashes(&e, c.Replicated)
		e.uvarint(c.Count)
		e.bool1(c.Record != nil)
		if c.Record != nil {
			e.byte1(byte(c.Record.Kind))
			e.str(c.Record.Name)
			e.bytes(c.Record.Value)
		}
		// Whether the File's xattrs were given (an empty set replaces a
		// replaced file's; nil keeps them): the body alone cannot say.
		e.bool1(c.File != nil && c.File.Xattrs != nil)
		if version >= 8 {
			e.bool1(c.Lock != nil)
			if c.Lock != nil {
				appendLockCmd(&e, c.Lock)
			}
		}
		if version >= upgradeVersion {
			e.bool1(c.Upgrade != nil)
			if c.Upgrade != nil {
				appendUpgrade(&e, c.Upgrade)
			}
		}
		if version >= trashVersion {
			appendTrashFields(&e, c) // apply_trash.go
		}
		if version >= ownVersion {
			e.bool1(c.Own != nil)
			if c.Own != nil {
				appendOwnCmd(&e, c.Own) // owners.go
			}
			e.bool1(c.Exclusive)
			e.bool1(c.NoParents)
		}
		if version >= lockRightVersion {
			e.bool1(c.Right != nil)
			if c.Right != nil {
				appendRightCmd(&e, c.Right) // lockrights.go
			}
		}
	}
	return e.b, nil
}

// DecodeCommands decodes a payload written by EncodeCommands. Errors wrap
// ErrCorrupt. Safe for concurrent use.
func DecodeCommands(p []byte) ([]Command, error) {
	d := decoder{b: p}
	version := d.byte1()
	if d.err == nil && version > commandVersion {
		return nil, fmt.Errorf("%w: command payload version %d; this binary reads 2 to %d: upgrade this node's binary", ErrUnsupported, version, commandVersion)
	}
	if d.err == nil && version < 2 {
		return nil, errCorrupt("command payload version %d", version)
	}
	n := d.count(maxCommands)
	cmds := make([]Command, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var c Command
		c.Op = Op(d.byte1())
		if d.err == nil && (c.Op < OpCreateBucket || c.Op > opLast) {
			d.fail("unknown op %d", c.Op)
		}
		c.BucketName = d.str()
		c.Path = d.str()
		c.DstPath = d.str()
		if d.bool1() {
			// A command carries the bucket body of its time: command
			// versions 2 and 3 bodies of versions 2 and 3, 4 to 6 of
			// version 4, 7 of version 5.
			c.Bucket = decodeBucketBody(&d, commandBucketVersion(version))
		}
		if d.bool1() {
			c.File = &Inode{Ino: Ino(d.uvarint())}
			decodeInodeBody(&d, c.File, version >= 6)
		}
		c.TimeNs = d.varint()
		c.IfMatch = d.str()
		c.IfNoneMatchAny = d.bool1()
		c.StartIndex = d.uvarint()
		c.Reap = decodeHashes(&d)
		c.ReapBefore = d.varint()
		if d.bool1() {
			c.Node = decodeNodeBody(&d)
		}
		if version >= 3 {
			c.Under = decodeHashes(&d)
			c.Replicated = decodeHashes(&d)
		}
		if version >= 5 {
			c.Count = d.uvarint()
		}
		if version >= 7 {
			if d.bool1() {
				c.Record = &Record{Kind: RecordKind(d.byte1()), Name: d.str(), Value: append([]byte(nil), d.raw()...)}
			}
			if d.bool1() && c.File != nil && c.File.Xattrs == nil {
				c.File.Xattrs = map[string][]byte{}
			}
		}
		if version >= 8 && d.bool1() {
			c.Lock = decodeLockCmd(&d)
		}
		if version >= upgradeVersion && d.bool1() {
			c.Upgrade = decodeUpgrade(&d)
		}
		if version >= trashVersion {
			decodeTrashFields(&d, &c)
		}
		if version >= ownVersion {
			if d.bool1() {
				c.Own = decodeOwnCmd(&d)
			}
			c.Exclusive = d.bool1()
			c.NoParents = d.bool1()
		}
		if version >= lockRightVersion && d.bool1() {
			c.Right = decodeRightCmd(&d)
		}
		cmds = append(cmds, c)
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode commands: %w", err)
	}
	return cmds, nil
}

// decodeRecordValue strips a stored record's version byte.
func decodeRecordValue(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != recordVersion {
		return nil, errCorrupt("record value version")
	}
	return append([]byte(nil), v[1:]...), nil
}

// Encoding is one kind of record this binary writes to the log or the
// namespace, and the range of its versions it reads.
type Encoding struct {
	Name string `json:"name"` // command, inode, bucket, node, record, lock
	Min  int    `json:"min"`  // the oldest version read
	Max  int    `json:"max"`  // the newest, the one written
}

// Encodings lists what this binary can read (cairn version). The command
// payload's version is the log version (version.go): a payload is written
// at the lowest version that holds its commands, 7 for ordinary ones.
func Encodings() []Encoding {
	return []Encoding{
		{"command", 2, commandVersion},
		{"inode", 1, inodeVersion},
		{"bucket", 2, bucketVersion},
		{"node", nodeVersion, nodeVersion},
		{"record", recordVersion, recordVersion},
		{"lock", lockVersion, lockRightTableVersion},
		{"owner", ownerVersion, ownerVersion},
	}
}
