package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// hashes returns n pseudo-random blob hashes from a fixed seed. Blob names
// are SHA-256 digests, so uniform random bytes model them.
func hashes(seed uint64, n int) [][32]byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([][32]byte, n)
	for i := range out {
		for j := 0; j < 32; j += 8 {
			v := rng.Uint64()
			for b := 0; b < 8; b++ {
				out[i][j+b] = byte(v >> (8 * b))
			}
		}
	}
	return out
}

// equalNodes returns n Live nodes of weight 1, IDs 1..n, zones assigned
// round-robin from zones (all in zone "" if zones is empty).
func equalNodes(n int, zones ...string) []Node {
	ns := make([]Node, n)
	for i := range ns {
		ns[i] = Node{ID: NodeID(i + 1), Weight: 1, State: Live}
		if len(zones) > 0 {
			ns[i].Zone = zones[i%len(zones)]
		}
	}
	return ns
}

func mustMap(t testing.TB, nodes []Node) *Map {
	t.Helper()
	m, err := NewMap(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomNodes returns a random membership: 1..maxN nodes with random
// weights, zones and states (some Dead, Draining, Witness).
func randomNodes(rng *rand.Rand, maxN int, zones int) []Node {
	n := 1 + rng.IntN(maxN)
	ids := rng.Perm(1000)[:n]
	ns := make([]Node, n)
	for i := range ns {
		ns[i] = Node{
			ID:     NodeID(ids[i] + 1),
			Zone:   fmt.Sprintf("z%d", rng.IntN(zones)),
			Weight: []float64{1, 1, 1, 2, 0.5, 3.7}[rng.IntN(6)],
		}
		switch p := rng.IntN(10); {
		case p < 6:
			ns[i].State = Live
		case p < 8:
			ns[i].State = Dead
		case p < 9:
			ns[i].State = Draining
		default:
			ns[i].State = Witness
			ns[i].Weight = 0
		}
	}
	return ns
}

// near fails unless got is within 6 standard deviations of the proportion
// want estimated from n samples. Seeds are fixed, so a pass is repeatable;
// the bound is what a correct implementation meets with any seed.
func near(t *testing.T, what string, got, want float64, n int) {
	t.Helper()
	sigma := math.Sqrt(want * (1 - want) / float64(n))
	if math.Abs(got-want) > 6*sigma+1e-12 {
		t.Errorf("%s = %.4f, want %.4f ± %.4f (6σ)", what, got, want, 6*sigma)
	} else {
		t.Logf("%s = %.4f (want %.4f, σ %.4f)", what, got, want, sigma)
	}
}

func zonesOf(m *Map, ids []NodeID) map[string]int {
	z := map[string]int{}
	for _, id := range ids {
		n, _ := m.Node(id)
		z[n.Zone]++
	}
	return z
}

func diff(a, b []NodeID) []NodeID { // elements of a not in b
	var out []NodeID
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
