package placement

// Pinned outputs for TestGolden, recorded when the placement function was
// first written. Do not regenerate them to make a test pass: a difference
// means every cluster's data would move.

const goldenDraw = 0x3fb96237205a5665

var goldenRanks = [][]NodeID{
	{2, 6, 4, 5, 1, 3},
	{6, 3, 2, 5, 4, 1},
	{2, 5, 3, 1, 6, 4},
	{3, 1, 6, 5, 2, 4},
	{5, 2, 3, 1, 6, 4},
	{2, 6, 4, 1, 5, 3},
}
