package store

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
)

// A Watcher hears of every applied change by path, and of bucket changes
// as "all"; cancel stops it.
func TestWatch(t *testing.T) {
	rep := &fakeReplication{}
	st, _, _ := newReplicatedStore(t, rep)
	var mu sync.Mutex
	var got []string
	alls := 0
	cancel := st.Watch(func(paths []string, all bool) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, paths...)
		if all {
			alls++
		}
	})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, "web", "a/b.txt", bytes.NewReader([]byte("x")), PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(ctx, "web", "a/b.txt", "c.txt"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !slices.Contains(got, "web/a/b.txt") || !slices.Contains(got, "web/c.txt") || alls == 0 {
		t.Fatalf("watched %v (%d all), want web/a/b.txt, web/c.txt and a bucket change", got, alls)
	}
	n := len(got)
	mu.Unlock()
	cancel()
	if err := st.Delete(ctx, "web", "c.txt", ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("a cancelled watcher heard %v", got[n:])
	}
}
