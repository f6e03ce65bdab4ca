package placement

import (
	"fmt"
	"testing"
)

// BenchmarkReplicas measures Replicas (R=3) for clusters of 5 and 50 nodes
// in 3 zones, over 1024 different blob hashes.
func BenchmarkReplicas(b *testing.B) {
	for _, n := range []int{5, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			m := mustMap(b, equalNodes(n, "a", "b", "c"))
			hs := hashes(40, 1024)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if len(Replicas(m, hs[i&1023], 3)) != 3 {
					b.Fatal("short")
				}
			}
		})
	}
}

// BenchmarkPlace measures Place (R=3, one node dead): what a write does.
func BenchmarkPlace(b *testing.B) {
	for _, n := range []int{5, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := equalNodes(n, "a", "b", "c")
			nodes[0].State = Dead
			m := mustMap(b, nodes)
			hs := hashes(41, 1024)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				Place(m, hs[i&1023], 3)
			}
		})
	}
}
