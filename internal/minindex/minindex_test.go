package minindex

import (
	"context"
	"testing"
)

func TestWithFrom(t *testing.T) {
	ctx := context.Background()
	if got := From(ctx); got != 0 {
		t.Fatalf("From(background) = %d, want 0", got)
	}
	if With(ctx, 0) != ctx {
		t.Fatal("With(0) made a new context")
	}
	if got := From(With(ctx, 0)); got != 0 {
		t.Fatalf("With(0) carries %d", got)
	}
	if got := From(With(With(ctx, 7), 42)); got != 42 {
		t.Fatalf("From(With(With(7), 42)) = %d, want 42", got)
	}
}
