package node

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestTrashCollector: a series per bucket with a trash (a retention, or
// entries left after turning it off), none for a bucket without.
func TestTrashCollector(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	for _, b := range []store.BucketInfo{{Name: "web", TrashSeconds: 3600}, {Name: "old", TrashSeconds: 3600}, {Name: "plain"}} {
		if err := st.CreateBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"web", "old", "plain"} {
		for _, body := range []string{"one", "three"} {
			if _, _, err := st.Put(ctx, b, "f", strings.NewReader(body), store.PutOptions{Size: int64(len(body))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Delete(ctx, "web", "f", ""); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateBucket(ctx, store.BucketInfo{Name: "old"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(trashCollector{st})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()+"{"+m.GetLabel()[0].GetValue()+"}"] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"cairn_trash_entries{web}": 2, "cairn_trash_bytes{web}": 8, // "one" overwritten, "three" deleted
		"cairn_trash_entries{old}": 1, "cairn_trash_bytes{old}": 3, // off now, one entry left
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
