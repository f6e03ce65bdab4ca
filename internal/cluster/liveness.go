package cluster

import "sync"

// StaticLiveness is a Liveness whose answers are set by hand, for tests of
// packages that consult liveness (placement, replication, repair). The
// zero value knows no node, so every node is down. Safe for concurrent use.
type StaticLiveness struct {
	mu    sync.RWMutex
	alive map[uint64]bool
}

var _ Liveness = (*StaticLiveness)(nil)

// NewStaticLiveness returns a StaticLiveness in which the given nodes are
// alive and every other node is not.
func NewStaticLiveness(alive ...uint64) *StaticLiveness {
	s := &StaticLiveness{}
	for _, id := range alive {
		s.Set(id, true)
	}
	return s
}

// Alive reports whether id was last Set alive.
func (s *StaticLiveness) Alive(id uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.alive[id]
}

// Set marks node id alive or not.
func (s *StaticLiveness) Set(id uint64, alive bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alive == nil {
		s.alive = make(map[uint64]bool)
	}
	s.alive[id] = alive
}
