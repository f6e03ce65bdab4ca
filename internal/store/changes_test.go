package store

import (
	"context"
	"errors"
	"testing"
)

// ChangeMany makes a batch of namespace changes in order, each as its own
// call would, and a failing one leaves the others applied.
func TestChangeMany(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range []string{"d/a", "d/b", "d/c"} {
		mustPut(t, e.s, p, []byte(p))
	}
	mode := uint32(0o600)
	uid := uint32(33)
	errs := e.s.ChangeMany(ctx, "bkt", []Change{
		{Kind: ChangeDelete, Path: "d/a"},
		{Kind: ChangeSetAttrs, Path: "d/b", Set: SetAttrs{Mode: &mode, UID: &uid}},
		{Kind: ChangeDelete, Path: "d/missing"},
		{Kind: ChangeMkdir, Path: "e/f", Attrs: Attrs{Mode: 0o750, Explicit: true}},
		{Kind: ChangeSetAttrs, Path: "d/missing", Set: SetAttrs{Mode: &mode}},
		{Kind: ChangeDelete, Path: "d/c"},
		{Kind: ChangeDelete, Path: "d"}, // not empty: d/b is left
	})
	want := []error{nil, nil, ErrNotFound, nil, ErrNotFound, nil, ErrNotEmpty}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Errorf("change %d: %v, want %v", i, errs[i], w)
		}
	}
	for _, p := range []string{"d/a", "d/c"} {
		if _, err := e.s.Stat(ctx, "bkt", p); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s after its delete: %v", p, err)
		}
	}
	if info, err := e.s.Stat(ctx, "bkt", "d/b"); err != nil || info.Mode&0o777 != 0o600 || info.UID != 33 {
		t.Errorf("d/b after its setattr: %+v, %v", info, err)
	}
	if info, err := e.s.Stat(ctx, "bkt", "e/f"); err != nil || !info.IsDir || info.Mode&0o777 != 0o750 {
		t.Errorf("e/f after its mkdir: %+v, %v", info, err)
	}
}
