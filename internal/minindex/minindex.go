package minindex

import "context"

type key struct{}

// With returns ctx carrying index as the minimum applied index of the
// blob writes made with it (0: none; ctx is returned as it is).
func With(ctx context.Context, index uint64) context.Context {
	if index == 0 {
		return ctx
	}
	return context.WithValue(ctx, key{}, index)
}

// From returns the minimum applied index ctx carries, or 0.
func From(ctx context.Context) uint64 {
	v, _ := ctx.Value(key{}).(uint64)
	return v
}
