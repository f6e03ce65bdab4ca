package placement

import (
	"encoding/binary"
	"math"
)

// The functions in this file define where every blob lives. Changing any of
// them (a constant, the byte order, the rounding of one operation) moves
// data in every cluster that upgrades, so TestGolden pins their output.

// mix is the splitmix64 finalizer (Stafford's Mix13): a bijection on uint64
// with full avalanche, so inputs that differ in one bit give unrelated
// outputs.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// nodeSeed is a node's per-node salt, derived from its ID alone. IDs are
// small sequential integers in practice; mix spreads them over 64 bits.
func nodeSeed(id NodeID) uint64 {
	return mix(uint64(id)*0x9e3779b97f4a7c15 + 0x63616972_6e2d7077) // "cairn-pw"
}

// draw is the node's 64-bit pseudo-random draw for a blob: a function of the
// node's seed and the first 16 bytes (little-endian) of the blob hash.
// Blob hashes are SHA-256 digests, already uniform, so two rounds of mix
// are enough to make the draws of different nodes for one blob independent.
func draw(seed uint64, h *[32]byte) uint64 {
	h0 := binary.LittleEndian.Uint64(h[0:8])
	h1 := binary.LittleEndian.Uint64(h[8:16])
	return mix(mix(h0^seed) ^ h1)
}

// unit maps a draw to u in the open interval (0, 1): u = (2k+1) / 2^53 with
// k the top 52 bits of x. Every step is exact.
func unit(x uint64) float64 {
	k := x >> 12
	return float64(2*k+1) * (1.0 / (1 << 53))
}

// negLn returns -ln(u) for u in (0, 1), using only IEEE-754 basic
// operations, each explicitly rounded (the float64 conversions forbid the
// compiler from fusing a multiply and an add). math.Log is not used because
// its result may differ in the last bit between architectures (amd64 has an
// assembly version, arm64 fuses multiply-adds), and every node of a mixed
// cluster must compute the same placement. This is the FreeBSD e_log.c
// algorithm that math.Log's portable version uses; TestNegLn checks it
// against math.Log.
func negLn(u float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 3fe62e42 fee00000
		ln2Lo = 1.90821492927058770002e-10 // 3dea39ef 35793c76
		l1    = 6.666666666666735130e-01   // 3FE55555 55555593
		l2    = 3.999999999940941908e-01   // 3FD99999 9997FA04
		l3    = 2.857142874366239149e-01   // 3FD24924 94229359
		l4    = 2.222219843214978396e-01   // 3FCC71C5 1D8E78AF
		l5    = 1.818357216161805012e-01   // 3FC74664 96CB03DE
		l6    = 1.531383769920937332e-01   // 3FC39A09 D078C69F
		l7    = 1.479819860511658591e-01   // 3FC2F112 DF3E5244
	)
	// u is normal and positive (u >= 2^-53): split it into f1 * 2^e with
	// f1 in [0.5, 1) by bit manipulation, which is exact.
	bits := math.Float64bits(u)
	e := int(bits>>52&0x7ff) - 1022
	f1 := math.Float64frombits(bits&^(0x7ff<<52) | 1022<<52)
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		e--
	}
	f := f1 - 1
	k := float64(e)

	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	r := t1 + t2
	hfsq := float64(0.5*f) * f
	hfsq = float64(hfsq)
	ln := float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
	return -ln
}

// key is a node's rank key for a blob: -ln(u) / weight, stored as
// -ln(u) * (1/weight). The lowest key ranks first. It orders nodes exactly
// as the weighted rendezvous score weight / -ln(u) does, highest first
// (the score is 1/key).
func key(seed uint64, invWeight float64, h *[32]byte) float64 {
	return float64(negLn(unit(draw(seed, h))) * invWeight)
}
