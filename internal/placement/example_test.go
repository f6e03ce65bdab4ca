package placement_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/cairn-fs/cairn/internal/placement"
)

func Example() {
	m, err := placement.NewMap([]placement.Node{
		{ID: 1, Zone: "rack1", Weight: 1, State: placement.Live},
		{ID: 2, Zone: "rack1", Weight: 1, State: placement.Live},
		{ID: 3, Zone: "rack2", Weight: 2, State: placement.Live},
		{ID: 4, Zone: "rack2", Weight: 1, State: placement.Dead},
		{ID: 5, Zone: "lb", State: placement.Witness},
	})
	if err != nil {
		panic(err)
	}
	h := sha256.Sum256([]byte("hello, world\n"))
	fmt.Println("rank:    ", placement.Rank(m, h))
	fmt.Println("replicas:", placement.Replicas(m, h, 2))
	p := placement.Place(m, h, 3)
	fmt.Println("home:    ", p.Home, "targets:", p.Targets)
	fmt.Println("stand-ins:", p.StandIns(), "absent:", p.Absent())
	fmt.Println("mirror:  ", placement.Place(m, h, placement.Mirror).Targets)
	// Output:
	// rank:     [3 1 4 2]
	// replicas: [3 1]
	// home:     [3 1 4] targets: [3 1 2]
	// stand-ins: [2] absent: [4]
	// mirror:   [3 1 2]
}
