package s3

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestCreateOwnedBucket: in us-east-1, CreateBucket of a bucket its
// caller owns answers 200 and keeps the bucket's objects, as AWS does
// there; in any other region it is BucketAlreadyOwnedByYou.
func TestCreateOwnedBucket(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b, key := "mine", "kept.txt"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: &key, Body: strings.NewReader("still here")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatalf("re-creating an owned bucket in us-east-1: %v", err)
	}
	out, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(body) != "still here" {
		t.Fatalf("the object after the re-creation: %q", body)
	}
	cfg := e.h.cfg
	cfg.Registry, cfg.Region = nil, "eu-west-1"
	eu, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(eu)
	defer srv.Close()
	ce := e.client(srv, e.key.ID, e.key.Secret)
	ce = sdks3.New(sdks3.Options{}, func(o *sdks3.Options) { *o = ce.Options(); o.Region = "eu-west-1" })
	_, err = ce.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b,
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint("eu-west-1")}})
	if errCode(err) != "BucketAlreadyOwnedByYou" {
		t.Fatalf("re-creating an owned bucket in eu-west-1: %v", err)
	}
}

// TestCompleteDuplicatePart: a part number listed twice (a client re-sent
// the part, and the first send finished last) is accepted; the object
// holds the upload of that part that finished last, once.
func TestCompleteDuplicatePart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b, key := "dup", "obj"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	up, err := c.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: &b, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	put := func(n int32, data []byte) types.CompletedPart {
		t.Helper()
		out, err := c.UploadPart(ctx, &sdks3.UploadPartInput{Bucket: &b, Key: &key, UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatal(err)
		}
		return types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)}
	}
	first := bytes.Repeat([]byte("a"), 5<<20)
	last := bytes.Repeat([]byte("b"), 5<<20)
	p1a := put(1, first)
	p1b := put(1, last) // the re-send that finished last
	p2 := put(2, []byte("tail"))
	complete := func(ps ...types.CompletedPart) error {
		_, err := c.CompleteMultipartUpload(ctx, &sdks3.CompleteMultipartUploadInput{Bucket: &b, Key: &key, UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: ps}})
		return err
	}
	wrong := types.CompletedPart{ETag: aws.String(`"0123456789abcdef0123456789abcdef"`), PartNumber: aws.Int32(1)}
	if err := complete(wrong, wrong, p2); errCode(err) != "InvalidPart" {
		t.Fatalf("a part number listed twice, neither ETag stored: %v", err)
	}
	if err := complete(p2, p1a); errCode(err) != "InvalidPartOrder" {
		t.Fatalf("a decreasing list: %v", err)
	}
	if err := complete(p1a, p1b, p2); err != nil {
		t.Fatalf("a part number listed twice: %v", err)
	}
	out, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, append(append([]byte(nil), last...), "tail"...)) {
		t.Fatalf("object of %d bytes: not the last upload of part 1 then part 2", len(got))
	}
	if tag := aws.ToString(out.ETag); !strings.HasSuffix(tag, `-2"`) {
		t.Fatalf("multipart ETag %s: want 2 parts", tag)
	}
}
