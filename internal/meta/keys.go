package meta

import (
	"encoding/binary"

	"github.com/cairn-fs/cairn/internal/cas"
)

// Key prefixes. See doc.go for the full layout.
const (
	pInode    = 'i'
	pDentry   = 'd'
	pBucket   = 'b'
	pRef      = 'r'
	pGarbage  = 'g'
	pGarbageH = 'h'
	pReaped   = 'x'
	pReapedI  = 'y'
	pMeta     = 'm'
	pNode     = 'n'
	pUnder    = 'u'
	pRecord   = 'c'
)

// Meta keys.
var (
	keyApplied = []byte("mapplied")
	keyNextIno = []byte("mnextino")
	keyCounts  = []byte("mcounts")
	keyUnder   = []byte("munder")
)

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// sortableTime maps int64 to uint64 so that big-endian bytes sort like the
// signed value (flip the sign bit).
func sortableTime(t int64) uint64 { return uint64(t) ^ (1 << 63) }

func unsortableTime(u uint64) int64 { return int64(u ^ (1 << 63)) }

func inodeKey(ino Ino) []byte {
	return binary.BigEndian.AppendUint64([]byte{pInode}, uint64(ino))
}

// dirPrefix is the prefix of every dentry of directory dir.
func dirPrefix(dir Ino) []byte {
	return binary.BigEndian.AppendUint64([]byte{pDentry}, uint64(dir))
}

// dentryKey is the key of entry keyName (a dir's keyName ends in "/").
func dentryKey(dir Ino, keyName string) []byte {
	return append(dirPrefix(dir), keyName...)
}

func bucketKey(name string) []byte { return append([]byte{pBucket}, name...) }

func refKey(h cas.Hash) []byte { return append([]byte{pRef}, h[:]...) }

func garbageKey(t int64, h cas.Hash) []byte {
	k := binary.BigEndian.AppendUint64([]byte{pGarbage}, sortableTime(t))
	return append(k, h[:]...)
}

func garbageHashKey(h cas.Hash) []byte { return append([]byte{pGarbageH}, h[:]...) }

func reapedKey(h cas.Hash) []byte { return append([]byte{pReaped}, h[:]...) }

func reapedIndexKey(index uint64, h cas.Hash) []byte {
	k := binary.BigEndian.AppendUint64([]byte{pReapedI}, index)
	return append(k, h[:]...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// DirentKeyName returns the name under which d is stored and ordered in its
// directory: d.Name, plus "/" for a directory. Pass it as ReadDir's after.
func DirentKeyName(d Dirent) string {
	if d.Type == TypeDir {
		return d.Name + "/"
	}
	return d.Name
}

// dentry value: child ino (8, big-endian) + type (1).
func encodeDentry(ino Ino, t FileType) []byte {
	return append(u64(uint64(ino)), byte(t))
}

func decodeDentry(v []byte) (Ino, FileType, error) {
	if len(v) != 9 {
		return 0, 0, errCorrupt("dentry value of %d bytes", len(v))
	}
	return Ino(binary.BigEndian.Uint64(v)), FileType(v[8]), nil
}

// underKey is the key of an under-replicated blob's record.
func underKey(h cas.Hash) []byte { return append([]byte{pUnder}, h[:]...) }

// nodeKey is the key of cluster member id.
func nodeKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pNode}, id)
}

// recordKey is the key of record name of kind k.
func recordKey(k RecordKind, name string) []byte {
	return append([]byte{pRecord, byte(k)}, name...)
}

// seqKey holds the last sequence number handed out for kind k's names.
func seqKey(k RecordKind) []byte { return append([]byte("mseq"), byte(k)) }
