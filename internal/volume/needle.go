package volume

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Format constants; see the package documentation for the byte layouts.
const (
	SuperblockSize = 16
	HeaderSize     = 48
	Version        = 1
	// MaxDataLen bounds a needle's data length; longer lengths are invalid.
	MaxDataLen = 64 << 20
	// MaxVolumeSize is the largest volume file: offsets/8 must fit in a uint32.
	MaxVolumeSize = 32 << 30
)

// Needle flags.
const (
	FlagLive      uint8 = 0
	FlagTombstone uint8 = 1
)

var (
	superMagic  = [4]byte{'C', 'R', 'N', 'V'}
	needleMagic = [4]byte{'C', 'R', 'N', 'N'}
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
)

// Header is a decoded needle header.
type Header struct {
	Hash  [32]byte
	Flags uint8
	Len   uint32 // data length in bytes
}

// Tombstone reports whether the needle is a tombstone.
func (h Header) Tombstone() bool { return h.Flags == FlagTombstone }

// NeedleSize returns the bytes a needle with n data bytes occupies,
// padding included.
func NeedleSize(n int) int64 { return (int64(HeaderSize) + int64(n) + 7) &^ 7 }

// DataOffset returns the file offset of the data of the needle at off.
func DataOffset(off int64) int64 { return off + HeaderSize }

// AppendNeedle appends the encoded needle (header, data, padding) to dst.
// It is a pure function.
func AppendNeedle(dst []byte, h [32]byte, flags uint8, data []byte) []byte {
	hdr := needleHeader(h, flags, data)
	dst = append(dst, hdr[:]...)
	dst = append(dst, data...)
	return append(dst, padding[:padLen(len(data))]...)
}

// padding is the zeros that pad a needle to 8 bytes (NeedleSize).
var padding [8]byte

// padLen is the padding after n data bytes.
func padLen(n int) int64 { return NeedleSize(n) - HeaderSize - int64(n) }

// needleHeader encodes the header of the needle (h, flags, data), its CRC
// computed over the header's first 44 bytes and data.
func needleHeader(h [32]byte, flags uint8, data []byte) [HeaderSize]byte {
	var hdr [HeaderSize]byte
	copy(hdr[0:4], needleMagic[:])
	hdr[4] = Version
	hdr[5] = flags
	copy(hdr[8:40], h[:])
	binary.LittleEndian.PutUint32(hdr[40:44], uint32(len(data)))
	crc := crc32.Update(0, castagnoli, hdr[:44])
	crc = crc32.Update(crc, castagnoli, data)
	binary.LittleEndian.PutUint32(hdr[44:48], crc)
	return hdr
}

// DecodeHeader decodes and checks the static fields of a needle header (b
// must hold at least HeaderSize bytes). It does not check the CRC, which
// covers the data too; see CheckCRC. Errors wrap ErrCorrupt.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: short header", ErrCorrupt)
	}
	if [4]byte(b[0:4]) != needleMagic {
		return h, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if b[4] != Version {
		return h, fmt.Errorf("%w: version %d", ErrCorrupt, b[4])
	}
	if b[5] > FlagTombstone {
		return h, fmt.Errorf("%w: flags %#x", ErrCorrupt, b[5])
	}
	if b[6] != 0 || b[7] != 0 {
		return h, fmt.Errorf("%w: reserved bytes set", ErrCorrupt)
	}
	h.Flags = b[5]
	copy(h.Hash[:], b[8:40])
	h.Len = binary.LittleEndian.Uint32(b[40:44])
	if h.Len > MaxDataLen || (h.Flags == FlagTombstone && h.Len != 0) {
		return h, fmt.Errorf("%w: length %d", ErrCorrupt, h.Len)
	}
	return h, nil
}

// CheckCRC reports whether the CRC in hdr (an encoded header) matches hdr
// and data.
func CheckCRC(hdr, data []byte) bool {
	crc := crc32.Update(0, castagnoli, hdr[:44])
	crc = crc32.Update(crc, castagnoli, data)
	return crc == binary.LittleEndian.Uint32(hdr[44:48])
}

func encodeSuperblock(id uint32) []byte {
	b := make([]byte, SuperblockSize)
	copy(b[0:4], superMagic[:])
	b[4] = Version
	binary.LittleEndian.PutUint32(b[8:12], id)
	binary.LittleEndian.PutUint32(b[12:16], crc32.Checksum(b[:12], castagnoli))
	return b
}

// checkNeedle reports whether an encoded header records length n and its
// CRC matches header and data.
func checkNeedle(hdr, data []byte, n int) bool {
	return binary.LittleEndian.Uint32(hdr[40:44]) == uint32(n) && CheckCRC(hdr, data)
}
