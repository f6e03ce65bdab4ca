package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cairn-fs/cairn/internal/store"
)

// versionsOf lists every version and delete marker of bucket, in pages
// of size page, as "key:id:latest" (markers "key:M:id:latest").
func versionsOf(t *testing.T, c *sdks3.Client, bucket string, page int32, delim string) (items, prefixes []string) {
	t.Helper()
	in := &sdks3.ListObjectVersionsInput{Bucket: &bucket, MaxKeys: aws.Int32(page)}
	if delim != "" {
		in.Delimiter = &delim
	}
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("ListObjectVersions does not end")
		}
		out, err := c.ListObjectVersions(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		// The SDK splits versions and markers: merge them back in order
		// (newest first within a key, by time).
		type item struct {
			s    string
			key  string
			time int64
		}
		var got []item
		for _, v := range out.Versions {
			got = append(got, item{fmt.Sprintf("%s:%s:%v", aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest)), aws.ToString(v.Key), v.LastModified.UnixNano()})
		}
		for _, m := range out.DeleteMarkers {
			got = append(got, item{fmt.Sprintf("%s:M:%s:%v", aws.ToString(m.Key), aws.ToString(m.VersionId), aws.ToBool(m.IsLatest)), aws.ToString(m.Key), m.LastModified.UnixNano()})
		}
		// Within a key, newest first: a marker's time is its deletion's,
		// after the version it ended (the raw order is checked apart).
		sort.SliceStable(got, func(i, j int) bool {
			if got[i].key != got[j].key {
				return got[i].key < got[j].key
			}
			return got[i].time > got[j].time
		})
		for _, g := range got {
			items = append(items, g.s)
		}
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		if len(got)+len(out.CommonPrefixes) > int(page) {
			t.Fatalf("a page of %d holds %d", page, len(got)+len(out.CommonPrefixes))
		}
		if !aws.ToBool(out.IsTruncated) {
			return items, prefixes
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

func body(t *testing.T, out *sdks3.GetObjectOutput, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// TestVersioning: PutBucketVersioning and GetBucketVersioning; PUTs
// answer the IDs that ListObjectVersions, GET and HEAD by versionId then
// use; a DELETE is a delete marker, and deleting it undeletes; deleting
// the current version makes the previous one current; deleting a
// noncurrent one is for good and idempotent; a copy of a version restores
// it; DeleteObjects by version empties the bucket, which can then go.
func TestVersioning(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b := "vers"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	gv, err := c.GetBucketVersioning(ctx, &sdks3.GetBucketVersioningInput{Bucket: &b})
	if err != nil || gv.Status != "" {
		t.Fatalf("versioning of a new bucket: %+v %v", gv, err)
	}
	put := func(key, status string, mfa types.MFADelete) error {
		_, err := c.PutBucketVersioning(ctx, &sdks3.PutBucketVersioningInput{Bucket: &b,
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatus(status), MFADelete: mfa}})
		return err
	}
	if err := put(b, "Suspended", ""); errCode(err) != "NotImplemented" {
		t.Fatalf("Suspended: %v", err)
	}
	if err := put(b, "Enabled", types.MFADeleteEnabled); errCode(err) != "NotImplemented" {
		t.Fatalf("MFA delete: %v", err)
	}
	if err := put(b, "Sometimes", ""); errCode(err) != "IllegalVersioningConfigurationException" {
		t.Fatalf("a bad status: %v", err)
	}
	if err := put(b, "Enabled", types.MFADeleteDisabled); err != nil {
		t.Fatal(err)
	}
	if gv, err := c.GetBucketVersioning(ctx, &sdks3.GetBucketVersioningInput{Bucket: &b}); err != nil || gv.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("versioning: %+v %v", gv, err)
	}
	if bi, _ := e.st.Bucket(ctx, b); !store.Versioned(bi) {
		t.Fatalf("the bucket's trash: %+v", bi)
	}

	var ids []string
	for i := 1; i <= 3; i++ {
		out, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader(fmt.Sprintf("version %d", i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.VersionId))
	}
	if ids[0] == "" || ids[0] == ids[1] || ids[1] == ids[2] {
		t.Fatalf("PUT version IDs %v", ids)
	}
	items, _ := versionsOf(t, c, b, 1000, "")
	want := []string{"k:" + ids[2] + ":true", "k:" + ids[1] + ":false", "k:" + ids[0] + ":false"}
	if fmt.Sprint(items) != fmt.Sprint(want) {
		t.Fatalf("versions %v, want %v", items, want)
	}
	get := func(id string, in *sdks3.GetObjectInput) (*sdks3.GetObjectOutput, error) {
		if in == nil {
			in = &sdks3.GetObjectInput{}
		}
		in.Bucket, in.Key = &b, aws.String("k")
		if id != "" {
			in.VersionId = &id
		}
		return c.GetObject(ctx, in)
	}
	for i, id := range ids {
		out, err := get(id, nil)
		if got := body(t, out, err); got != fmt.Sprintf("version %d", i+1) || aws.ToString(out.VersionId) != id {
			t.Fatalf("GET version %d: %q, id %q", i+1, got, aws.ToString(out.VersionId))
		}
	}
	if out, err := get("", nil); body(t, out, err) != "version 3" || aws.ToString(out.VersionId) != ids[2] {
		t.Fatalf("GET without a version: %v", aws.ToString(out.VersionId))
	}
	if out, err := get(ids[0], &sdks3.GetObjectInput{Range: aws.String("bytes=2-4")}); body(t, out, err) != "rsi" {
		t.Fatal("a range of an old version")
	}
	old, err := get(ids[0], nil)
	body(t, old, err)
	if _, err := get(ids[0], &sdks3.GetObjectInput{IfNoneMatch: old.ETag}); status(err) != http.StatusNotModified {
		t.Fatalf("If-None-Match on an old version: %v", err)
	}
	h, err := c.HeadObject(ctx, &sdks3.HeadObjectInput{Bucket: &b, Key: aws.String("k"), VersionId: &ids[1]})
	if err != nil || aws.ToInt64(h.ContentLength) != 9 || aws.ToString(h.VersionId) != ids[1] {
		t.Fatalf("HEAD of a version: %+v %v", h, err)
	}
	if _, err := get("not-a-version", nil); errCode(err) != "InvalidArgument" {
		t.Fatalf("a malformed version ID: %v", err)
	}
	if _, err := get("null", nil); errCode(err) != "NoSuchVersion" {
		t.Fatalf("version null of a versioned bucket: %v", err)
	}
	acl, err := c.GetObjectAcl(ctx, &sdks3.GetObjectAclInput{Bucket: &b, Key: aws.String("k"), VersionId: &ids[0]})
	if err != nil || len(acl.Grants) != 1 {
		t.Fatalf("ACL of a version: %+v %v", acl, err)
	}
	if _, err := c.PutObjectAcl(ctx, &sdks3.PutObjectAclInput{Bucket: &b, Key: aws.String("k"), VersionId: &ids[0], ACL: types.ObjectCannedACLPublicRead}); errCode(err) != "NotImplemented" {
		t.Fatalf("ACL of a noncurrent version: %v", err)
	}
	if _, err := c.PutObjectAcl(ctx, &sdks3.PutObjectAclInput{Bucket: &b, Key: aws.String("k"), VersionId: &ids[2], ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("ACL of the current version: %v", err)
	}

	// A delete is a delete marker, the latest; GET answers NoSuchKey and
	// says so; the marker itself has no body.
	del, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String("k")})
	if err != nil || !aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) == "" {
		t.Fatalf("delete: %+v %v", del, err)
	}
	marker := aws.ToString(del.VersionId)
	_, err = get("", nil)
	var re *smithyhttp.ResponseError
	if errCode(err) != "NoSuchKey" || !errors.As(err, &re) || re.Response.Header.Get("x-amz-delete-marker") != "true" ||
		re.Response.Header.Get("x-amz-version-id") != marker {
		t.Fatalf("GET of a deleted key: %v", err)
	}
	if _, err := get(marker, nil); errCode(err) != "MethodNotAllowed" {
		t.Fatalf("GET of a delete marker: %v", err)
	}
	items, _ = versionsOf(t, c, b, 1000, "")
	want = append([]string{"k:M:" + marker + ":true", "k:" + ids[2] + ":false"}, want[1:]...)
	if fmt.Sprint(items) != fmt.Sprint(want) {
		t.Fatalf("after a delete: %v, want %v", items, want)
	}
	// The raw answer interleaves markers and versions, newest first.
	req, _ := http.NewRequest(http.MethodGet, e.plain.URL+"/"+b+"?versions", nil)
	req.Header.Set("Authorization", "Bearer "+e.key.ID+":"+e.key.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if i, j := strings.Index(string(raw), "<DeleteMarker "), strings.Index(string(raw), "<Version "); i < 0 || j < i {
		t.Fatalf("raw listing: %s", raw)
	}
	// A second delete of a deleted key makes nothing new.
	if del, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String("k")}); err != nil || aws.ToString(del.VersionId) != marker {
		t.Fatalf("delete again: %+v %v", del, err)
	}
	// Deleting the marker undeletes, with the same version ID.
	if del, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String("k"), VersionId: &marker}); err != nil ||
		!aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) != marker {
		t.Fatalf("delete of the marker: %+v %v", del, err)
	}
	if out, err := get("", nil); body(t, out, err) != "version 3" || aws.ToString(out.VersionId) != ids[2] {
		t.Fatal("undelete")
	}
	// Deleting the current version makes the previous one current.
	if _, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String("k"), VersionId: &ids[2]}); err != nil {
		t.Fatal(err)
	}
	if out, err := get("", nil); body(t, out, err) != "version 2" || aws.ToString(out.VersionId) != ids[1] {
		t.Fatal("the previous version is not current")
	}
	// A noncurrent version goes for good; again is no error.
	for range 2 {
		if _, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &b, Key: aws.String("k"), VersionId: &ids[0]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := get(ids[0], nil); errCode(err) != "NoSuchVersion" {
		t.Fatalf("a deleted version: %v", err)
	}
	// A copy of a version onto its key restores it as a new version.
	if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("version 4")}); err != nil {
		t.Fatal(err)
	}
	cp, err := c.CopyObject(ctx, &sdks3.CopyObjectInput{Bucket: &b, Key: aws.String("k"), CopySource: aws.String(b + "/k?versionId=" + ids[1])})
	if err != nil || aws.ToString(cp.CopySourceVersionId) != ids[1] || aws.ToString(cp.VersionId) == "" {
		t.Fatalf("copy of a version: %+v %v", cp, err)
	}
	if out, err := get("", nil); body(t, out, err) != "version 2" {
		t.Fatal("the copy did not restore the version")
	}
	// Multipart in a versioned bucket: the completion is a version, and
	// its parts leave nothing in the trash.
	up, err := c.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &sdks3.UploadPartInput{Bucket: &b, Key: aws.String("mp"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatal(err)
	}
	comp, err := c.CompleteMultipartUpload(ctx, &sdks3.CompleteMultipartUploadInput{Bucket: &b, Key: aws.String("mp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
	if err != nil || aws.ToString(comp.VersionId) == "" {
		t.Fatalf("complete: %+v %v", comp, err)
	}
	if page, _ := e.st.TrashList(ctx, b, store.TrashListOptions{Prefix: internalDir + "/"}); len(page.Entries) > 1 { // the record's own overwrite, until collected
		t.Fatalf("parts kept in the trash: %+v", page.Entries)
	}
	// Empty the bucket by version (markers too), then delete it.
	items, _ = versionsOf(t, c, b, 2, "")
	var objs []types.ObjectIdentifier
	for _, it := range items {
		f := strings.Split(it, ":")
		objs = append(objs, types.ObjectIdentifier{Key: aws.String(f[0]), VersionId: aws.String(f[len(f)-2])})
	}
	res, err := c.DeleteObjects(ctx, &sdks3.DeleteObjectsInput{Bucket: &b, Delete: &types.Delete{Objects: objs}})
	if err != nil || len(res.Errors) != 0 || len(res.Deleted) != len(objs) {
		t.Fatalf("DeleteObjects by version: %+v %v", res, err)
	}
	if items, _ := versionsOf(t, c, b, 1000, ""); len(items) != 0 {
		t.Fatalf("left after deleting every version: %v", items)
	}
	if _, err := c.DeleteBucket(ctx, &sdks3.DeleteBucketInput{Bucket: &b}); err != nil {
		t.Fatalf("delete of the emptied bucket: %v", err)
	}
}

// TestVersionListing: ListObjectVersions pages through keys with several
// versions and delete markers, with and without a delimiter, and the
// pages together are the whole listing; DeleteObjects of a key makes a
// marker it names.
func TestVersionListing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b := "vlist"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketVersioning(ctx, &sdks3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "d/x", "d/y", "d/y", "e/f/g", "z", "z", "z"} {
		if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: &k, Body: strings.NewReader(k + "!")}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.DeleteObjects(ctx, &sdks3.DeleteObjectsInput{Bucket: &b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("d/x")}}}})
	if err != nil || len(res.Deleted) != 1 || !aws.ToBool(res.Deleted[0].DeleteMarker) || aws.ToString(res.Deleted[0].DeleteMarkerVersionId) == "" {
		t.Fatalf("DeleteObjects in a versioned bucket: %+v %v", res, err)
	}
	all, _ := versionsOf(t, c, b, 1000, "")
	if len(all) != 9 {
		t.Fatalf("versions: %v", all)
	}
	for _, page := range []int32{1, 2, 3, 4} {
		got, _ := versionsOf(t, c, b, page, "")
		if fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("pages of %d: %v\nwant %v", page, got, all)
		}
	}
	for _, page := range []int32{1, 2, 1000} {
		got, prefixes := versionsOf(t, c, b, page, "/")
		if fmt.Sprint(prefixes) != "[d/ e/]" || len(got) != 4 || !strings.HasPrefix(got[0], "a:") || !strings.HasPrefix(got[1], "z:") {
			t.Fatalf("pages of %d with a delimiter: %v %v", page, got, prefixes)
		}
	}
	// Version "null" in a bucket that is not versioned is the object.
	p := "plain"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &p}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &p, Key: aws.String("k"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	lv, err := c.ListObjectVersions(ctx, &sdks3.ListObjectVersionsInput{Bucket: &p})
	if err != nil || len(lv.Versions) != 1 || aws.ToString(lv.Versions[0].VersionId) != "null" {
		t.Fatalf("versions of an unversioned bucket: %+v %v", lv, err)
	}
	_, err = c.HeadObject(ctx, &sdks3.HeadObjectInput{Bucket: &p, Key: aws.String("nope")})
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response.Header.Get("x-amz-delete-marker") != "false" {
		t.Fatalf("HEAD of a missing key: %v", err)
	}
	if out, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &p, Key: aws.String("k"), VersionId: aws.String("null")}); body(t, out, err) != "x" || out.VersionId != nil {
		t.Fatal("version null")
	}
	if _, err := c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: &p, Key: aws.String("k"), VersionId: aws.String("null")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadObject(ctx, &sdks3.HeadObjectInput{Bucket: &p, Key: aws.String("k")}); status(err) != http.StatusNotFound {
		t.Fatalf("after deleting version null: %v", err)
	}
}
