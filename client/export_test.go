package client

// The sync tests run with lists that move to disk past 100 entries, so
// that both of spill.Map's homes are used.
func init() { syncSpillAfter = 100 }
