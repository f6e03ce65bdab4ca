package s3

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// listKeys lists bucket with in's prefix and delimiter, in pages of
// page, and returns the keys and common prefixes.
func listKeys(t *testing.T, c *sdks3.Client, b string, prefix, delim string, page int32) (keys, prefixes []string) {
	t.Helper()
	in := &sdks3.ListObjectsV2Input{Bucket: &b, Prefix: &prefix, MaxKeys: aws.Int32(page)}
	if delim != "" {
		in.Delimiter = &delim
	}
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("the listing does not end")
		}
		out, err := c.ListObjectsV2(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			return keys, prefixes
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// TestSnapshotKeys: the keys under .snapshots/NAME/ read snapshot NAME
// (GET and HEAD with ranges and conditionals, listings, a copy source);
// .snapshots/ lists the names; ordinary listings hide it; every write
// under it is AccessDenied; access follows the bucket's rules for the
// path inside the snapshot.
func TestSnapshotKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b := "snaps"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) {
		t.Helper()
		if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: &k, Body: strings.NewReader(v)}); err != nil {
			t.Fatal(err)
		}
	}
	put("a.txt", "a as it was")
	put("dir/b.txt", "b")
	put("dir/sub/c.txt", "c")
	if _, err := e.st.SnapshotCreate(ctx, b, "s1"); err != nil {
		t.Fatal(err)
	}
	put("a.txt", "a now")
	if _, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String("dir/b.txt")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"s2", "s1-b"} {
		if _, err := e.st.SnapshotCreate(ctx, b, n); err != nil {
			t.Fatal(err)
		}
	}

	get := func(key string, in *sdks3.GetObjectInput) (*sdks3.GetObjectOutput, error) {
		if in == nil {
			in = &sdks3.GetObjectInput{}
		}
		in.Bucket, in.Key = &b, &key
		return c.GetObject(ctx, in)
	}
	if out, err := get(".snapshots/s1/a.txt", nil); body(t, out, err) != "a as it was" {
		t.Fatal("a.txt of s1")
	}
	if out, err := get(".snapshots/s2/a.txt", nil); body(t, out, err) != "a now" {
		t.Fatal("a.txt of s2")
	}
	if out, err := get(".snapshots/s1/a.txt", &sdks3.GetObjectInput{Range: aws.String("bytes=2-3")}); body(t, out, err) != "as" {
		t.Fatal("a range of a snapshot's file")
	}
	h, err := c.HeadObject(ctx, &sdks3.HeadObjectInput{Bucket: &b, Key: aws.String(".snapshots/s1/dir/b.txt")})
	if err != nil || aws.ToInt64(h.ContentLength) != 1 {
		t.Fatalf("HEAD of a snapshot's file: %+v %v", h, err)
	}
	if _, err := get(".snapshots/s1/dir/b.txt", &sdks3.GetObjectInput{IfNoneMatch: h.ETag}); status(err) != http.StatusNotModified {
		t.Fatalf("If-None-Match: %v", err)
	}
	if _, err := get(".snapshots/s1/dir/b.txt", &sdks3.GetObjectInput{IfMatch: aws.String(`"nope"`)}); errCode(err) != "PreconditionFailed" {
		t.Fatalf("If-Match: %v", err)
	}
	for _, k := range []string{".snapshots/s2/dir/b.txt", ".snapshots/nope/a.txt", ".snapshots/s1", ".snapshots", ".snapshots/s1/dir"} {
		if _, err := get(k, nil); errCode(err) != "NoSuchKey" {
			t.Fatalf("GET %s: %v", k, err)
		}
	}
	if _, err := get(".snapshots/s1/a.txt", &sdks3.GetObjectInput{VersionId: aws.String("eocennne74aj8al31s8vhnfn52fg")}); errCode(err) != "NoSuchVersion" {
		t.Fatalf("a version of a snapshot's file: %v", err)
	}

	// A live file at the reserved path (written natively) is not served
	// over S3: the key reads the snapshots.
	if _, _, err := e.st.Put(ctx, b, ".snapshots/s1/a.txt", strings.NewReader("live"), store.PutOptions{Size: 4}); err != nil {
		t.Fatal(err)
	}
	if out, err := get(".snapshots/s1/a.txt", nil); body(t, out, err) != "a as it was" {
		t.Fatal("a live file shadowed the snapshot")
	}

	// Listings: the names, a snapshot's tree, every snapshot at once;
	// the live listings hide .snapshots/.
	for _, page := range []int32{1, 2, 1000} {
		_, p := listKeys(t, c, b, ".snapshots/", "/", page)
		if fmt.Sprint(p) != "[.snapshots/s1-b/ .snapshots/s1/ .snapshots/s2/]" {
			t.Fatalf("names (pages of %d): %v", page, p)
		}
		_, p = listKeys(t, c, b, ".snapshots/s1", "/", page)
		if fmt.Sprint(p) != "[.snapshots/s1-b/ .snapshots/s1/]" {
			t.Fatalf("names under s1 (pages of %d): %v", page, p)
		}
		k, p := listKeys(t, c, b, ".snapshots/s1/", "/", page)
		if fmt.Sprint(k, p) != "[.snapshots/s1/a.txt] [.snapshots/s1/dir/]" {
			t.Fatalf("s1 with a delimiter (pages of %d): %v %v", page, k, p)
		}
		k, _ = listKeys(t, c, b, ".snapshots/s1/", "", page)
		if fmt.Sprint(k) != "[.snapshots/s1/a.txt .snapshots/s1/dir/b.txt .snapshots/s1/dir/sub/c.txt]" {
			t.Fatalf("s1 (pages of %d): %v", page, k)
		}
		k, _ = listKeys(t, c, b, ".snapshots/", "", page)
		want := "[.snapshots/s1-b/a.txt .snapshots/s1-b/dir/sub/c.txt .snapshots/s1/a.txt .snapshots/s1/dir/b.txt .snapshots/s1/dir/sub/c.txt .snapshots/s2/a.txt .snapshots/s2/dir/sub/c.txt]"
		if fmt.Sprint(k) != want {
			t.Fatalf("every snapshot (pages of %d): %v", page, k)
		}
		k, p = listKeys(t, c, b, "", "/", page)
		if fmt.Sprint(k, p) != "[a.txt] [dir/]" {
			t.Fatalf("the live root (pages of %d): %v %v", page, k, p)
		}
		k, _ = listKeys(t, c, b, ".", "", page)
		if len(k) != 0 {
			t.Fatalf("the live bucket under '.': %v", k)
		}
	}
	lv, err := c.ListObjectVersions(ctx, &sdks3.ListObjectVersionsInput{Bucket: &b, Prefix: aws.String(".snapshots/s2/")})
	if err != nil || len(lv.Versions) != 2 || aws.ToString(lv.Versions[0].VersionId) != "null" {
		t.Fatalf("versions of a snapshot: %+v %v", lv, err)
	}

	// Read-only: every write answers AccessDenied, nothing changes.
	if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: aws.String(".snapshots/s1/a.txt"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
		t.Fatalf("PUT into a snapshot: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String(".snapshots/s1/a.txt")}); errCode(err) != "AccessDenied" {
		t.Fatalf("DELETE in a snapshot: %v", err)
	}
	if _, err := c.CopyObject(ctx, &sdks3.CopyObjectInput{Bucket: &b, Key: aws.String(".snapshots/s1/x"), CopySource: aws.String(b + "/a.txt")}); errCode(err) != "AccessDenied" {
		t.Fatalf("copy into a snapshot: %v", err)
	}
	if _, err := c.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String(".snapshots/s1/mp")}); errCode(err) != "AccessDenied" {
		t.Fatalf("multipart upload into a snapshot: %v", err)
	}
	res, err := c.DeleteObjects(ctx, &sdks3.DeleteObjectsInput{Bucket: &b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String(".snapshots/s1/a.txt")}}}})
	if err != nil || len(res.Errors) != 1 || aws.ToString(res.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects in a snapshot: %+v %v", res, err)
	}
	if out, err := get(".snapshots/s1/a.txt", nil); body(t, out, err) != "a as it was" {
		t.Fatal("the snapshot changed")
	}
	// A copy out of a snapshot restores a file.
	if _, err := c.CopyObject(ctx, &sdks3.CopyObjectInput{Bucket: &b, Key: aws.String("dir/b.txt"), CopySource: aws.String(b + "/.snapshots/s1/dir/b.txt")}); err != nil {
		t.Fatal(err)
	}
	if out, err := get("dir/b.txt", nil); body(t, out, err) != "b" {
		t.Fatal("restore by copy")
	}

	// Access: a key that may read and list dir/ only.
	g, _ := access.ParseGrant(b+"/dir/", access.ActionsOf(access.ActionRead, access.ActionList))
	k2, _ := access.NewKey("dironly", []access.Grant{g}, time.Now(), time.Time{})
	e.auth.SetKeys([]access.Key{e.key, k2})
	c2 := e.client(e.plain, k2.ID, k2.Secret)
	if out, err := c2.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String(".snapshots/s1/dir/b.txt")}); body(t, out, err) != "b" {
		t.Fatal("a granted path of a snapshot")
	}
	if _, err := c2.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String(".snapshots/s1/a.txt")}); errCode(err) != "AccessDenied" {
		t.Fatalf("a path outside the grant: %v", err)
	}
	if _, err := c2.ListObjectsV2(ctx, &sdks3.ListObjectsV2Input{Bucket: &b, Prefix: aws.String(".snapshots/s1/dir/")}); err != nil {
		t.Fatalf("listing a granted prefix of a snapshot: %v", err)
	}
	if _, err := c2.ListObjectsV2(ctx, &sdks3.ListObjectsV2Input{Bucket: &b, Prefix: aws.String(".snapshots/"), Delimiter: aws.String("/")}); errCode(err) != "AccessDenied" {
		t.Fatalf("listing the names without a grant on the bucket: %v", err)
	}
}
