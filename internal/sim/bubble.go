package sim

import (
	"runtime"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"
)

// Test runs one simulation the way it replays: inside a synctest bubble
// (every timer, ticker, sleep and deadline of every node runs on the
// bubble's fake clock, which moves only when every goroutine of the
// cluster is durably blocked), with crypto/rand drawn from the seed (Raft's
// randomized election timeouts use it) and one P, so that goroutines run
// one at a time. Run must not be called outside a bubble. RealTime is
// measured here, outside the fake clock.
func Test(t *testing.T, cfg Config) (Result, error) {
	var res Result
	var err error
	start := time.Now()
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	cryptotest.SetGlobalRandom(t, cfg.Seed)
	synctest.Test(t, func(t *testing.T) { res, err = Run(cfg) })
	res.RealTime = time.Since(start)
	return res, err
}
