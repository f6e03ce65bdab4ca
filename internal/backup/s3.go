package backup

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Options configure s3:// locations.
type S3Options struct {
	// Endpoint is the S3 service's URL ("": AWS, by Region). With an
	// endpoint, buckets are addressed path-style (http://HOST/BUCKET/KEY),
	// which every S3 server understands (Cairn, MinIO, Ceph).
	Endpoint string
	// Region signs the requests ("": us-east-1).
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are the credentials;
	// none: anonymous requests (enough to restore from a public bucket).
	AccessKeyID, SecretAccessKey, SessionToken string
}

// S3OptionsFromEnv reads the standard AWS variables: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (else
// AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL_S3 (else AWS_ENDPOINT_URL).
func S3OptionsFromEnv() S3Options {
	o := S3Options{
		AccessKeyID:     os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken:    os.Getenv("AWS_SESSION_TOKEN"),
		Region:          os.Getenv("AWS_REGION"),
		Endpoint:        os.Getenv("AWS_ENDPOINT_URL_S3"),
	}
	if o.Region == "" {
		o.Region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	return o
}

// Object metadata a backup puts on each object it writes: Holds reads
// the content address back with a HEAD.
const (
	metaSHA256 = "cairn-sha256"
	metaMtime  = "cairn-mtime"
	metaMode   = "cairn-mode"
)

// Sizes of S3 uploads: a file up to s3SingleMax is sent with one
// PutObject (its content in memory, its SHA-256 in
// x-amz-checksum-sha256, which the server checks); a larger one in parts
// of s3PartMin or more (at most s3MaxParts), one in memory at a time.
const (
	s3SingleMax = 16 << 20
	s3PartMin   = 8 << 20
	s3MaxParts  = 9000
)

type s3Location struct {
	c      *sdks3.Client
	bucket string
	prefix string
	name   string
}

// NewS3 returns the location bucket/prefix of the S3 service opts names;
// name is for messages. It does no I/O.
func NewS3(bucket, prefix, name string, opts S3Options, userAgent string) (Location, error) {
	prefix, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	region := opts.Region
	if region == "" {
		region = "us-east-1"
	}
	o := sdks3.Options{
		Region: region,
		// Checksums the SDK would add by itself (CRC32, in aws-chunked
		// trailers) are not needed: PutObject carries the SHA-256 the
		// server checks, parts their Content-MD5.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if opts.Endpoint != "" {
		if !strings.Contains(opts.Endpoint, "://") {
			return nil, fmt.Errorf("--s3-endpoint %q: expected a URL (http://HOST:PORT or https://...)", opts.Endpoint)
		}
		o.BaseEndpoint = aws.String(opts.Endpoint)
		o.UsePathStyle = true
	}
	if opts.AccessKeyID != "" || opts.SecretAccessKey != "" {
		creds := aws.Credentials{AccessKeyID: opts.AccessKeyID, SecretAccessKey: opts.SecretAccessKey, SessionToken: opts.SessionToken}
		o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })
	} else {
		o.Credentials = aws.AnonymousCredentials{}
	}
	if userAgent != "" {
		o.AppID = userAgent
	}
	return &s3Location{c: sdks3.New(o), bucket: bucket, prefix: prefix, name: name}, nil
}

func (l *s3Location) String() string      { return l.name }
func (l *s3Location) Close() error        { return nil }
func (l *s3Location) key(p string) string { return joinKey(l.prefix, p) }
func (l *s3Location) Batch() (int, int64) { return 1, 0 }

// s3Err adds the location and a hint to an S3 error.
func (l *s3Location) s3Err(op, key string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
			return fmt.Errorf("%s s3://%s/%s: %w (the credentials are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", op, l.bucket, key, err)
		case "NoSuchBucket":
			return fmt.Errorf("%s s3://%s/%s: %w (create the bucket first)", op, l.bucket, key, err)
		}
	}
	return fmt.Errorf("%s s3://%s/%s: %w", op, l.bucket, key, err)
}

// isNotFound reports an S3 answer 404 (NoSuchKey, NotFound).
func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 404
}

func (l *s3Location) Inventory(ctx context.Context, fn func(p string, f Found) error) error {
	base := ""
	if l.prefix != "" {
		base = l.prefix + "/"
	}
	in := &sdks3.ListObjectsV2Input{Bucket: aws.String(l.bucket), MaxKeys: aws.Int32(1000)}
	if base != "" {
		in.Prefix = aws.String(base)
	}
	pg := sdks3.NewListObjectsV2Paginator(l.c, in)
	for pages := 0; pg.HasMorePages(); pages++ {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return l.s3Err("list", base, err)
		}
		for _, o := range out.Contents {
			rel, ok := strings.CutPrefix(aws.ToString(o.Key), base)
			if !ok || CheckPath(rel) != nil {
				continue // MetaDir, directory markers, anything not ours
			}
			if err := fn(rel, Found{Size: aws.ToInt64(o.Size)}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *s3Location) ReadMeta(ctx context.Context, name string) (io.ReadCloser, error) {
	key := l.key(MetaDir + "/" + name)
	out, err := l.c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: aws.String(l.bucket), Key: aws.String(key)})
	if isNotFound(err) {
		return nil, fmt.Errorf("%s/%s/%s: %w", l.name, MetaDir, name, ErrNoMeta)
	}
	if err != nil {
		return nil, l.s3Err("get", key, err)
	}
	return out.Body, nil
}

// WriteMeta is a PutObject or a multipart upload completed at the end:
// S3 replaces an object atomically either way.
func (l *s3Location) WriteMeta(ctx context.Context, name string, e Entry, r io.Reader) error {
	return l.PutStream(ctx, MetaDir+"/"+name, e, r)
}

func (l *s3Location) RemoveMeta(ctx context.Context, name string) error {
	return l.Remove(ctx, MetaDir+"/"+name)
}

func (l *s3Location) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	out, err := l.c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: aws.String(l.bucket), Key: aws.String(l.key(p))})
	if err != nil {
		return nil, l.s3Err("get", l.key(p), err)
	}
	return out.Body, nil
}

func (l *s3Location) Holds(ctx context.Context, p string, e Entry) (bool, error) {
	out, err := l.c.HeadObject(ctx, &sdks3.HeadObjectInput{Bucket: aws.String(l.bucket), Key: aws.String(l.key(p))})
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, l.s3Err("head", l.key(p), err)
	}
	return aws.ToInt64(out.ContentLength) == e.Size && strings.EqualFold(out.Metadata[metaSHA256], e.SHA256), nil
}

func (l *s3Location) PutSmall(ctx context.Context, files []File) []error {
	errs := make([]error, len(files))
	for i, f := range files {
		errs[i] = l.putObject(ctx, f.Path, f.Data, f.Entry)
	}
	return errs
}

func (l *s3Location) metadata(e Entry) map[string]string {
	m := map[string]string{metaMode: strconv.FormatUint(uint64(e.Mode&0o7777), 8)}
	if e.SHA256 != "" {
		m[metaSHA256] = e.SHA256
	}
	if !e.Mtime.IsZero() {
		m[metaMtime] = e.Mtime.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// putObject stores data at p with its SHA-256 in x-amz-checksum-sha256:
// the server refuses a body that does not match (BadDigest).
func (l *s3Location) putObject(ctx context.Context, p string, data []byte, e Entry) error {
	in := &sdks3.PutObjectInput{
		Bucket: aws.String(l.bucket), Key: aws.String(l.key(p)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sha256Raw(data))),
		Metadata:       l.metadata(e),
	}
	if e.ContentType != "" {
		in.ContentType = aws.String(e.ContentType)
	}
	if _, err := l.c.PutObject(ctx, in); err != nil {
		return l.s3Err("put", l.key(p), err)
	}
	return nil
}

// PutStream sends a file of up to s3SingleMax with one PutObject (read
// whole first: a wrong content fails before anything is sent), a larger
// one as a multipart upload that is completed only once r has ended
// without an error, and aborted otherwise.
func (l *s3Location) PutStream(ctx context.Context, p string, e Entry, r io.Reader) error {
	if e.Size <= s3SingleMax {
		data := make([]byte, e.Size)
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		if err := expectEOF(r); err != nil {
			return err
		}
		return l.putObject(ctx, p, data, e)
	}
	key := l.key(p)
	cin := &sdks3.CreateMultipartUploadInput{Bucket: aws.String(l.bucket), Key: aws.String(key), Metadata: l.metadata(e)}
	if e.ContentType != "" {
		cin.ContentType = aws.String(e.ContentType)
	}
	up, err := l.c.CreateMultipartUpload(ctx, cin)
	if err != nil {
		return l.s3Err("create multipart upload", key, err)
	}
	completed := false
	defer func() {
		if !completed {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			_, _ = l.c.AbortMultipartUpload(actx, &sdks3.AbortMultipartUploadInput{
				Bucket: aws.String(l.bucket), Key: aws.String(key), UploadId: up.UploadId})
			cancel()
		}
	}()
	partSize := max(int64(s3PartMin), (e.Size+s3MaxParts-1)/s3MaxParts)
	buf := make([]byte, partSize)
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < e.Size; n++ {
		size := min(partSize, e.Size-off)
		if _, err := io.ReadFull(r, buf[:size]); err != nil {
			return err
		}
		md := md5.Sum(buf[:size])
		out, err := l.c.UploadPart(ctx, &sdks3.UploadPartInput{
			Bucket: aws.String(l.bucket), Key: aws.String(key), UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: bytes.NewReader(buf[:size]), ContentLength: aws.Int64(size),
			ContentMD5: aws.String(base64.StdEncoding.EncodeToString(md[:])),
		})
		if err != nil {
			return l.s3Err(fmt.Sprintf("upload part %d of", n), key, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
		off += size
	}
	if err := expectEOF(r); err != nil {
		return err
	}
	_, err = l.c.CompleteMultipartUpload(ctx, &sdks3.CompleteMultipartUploadInput{
		Bucket: aws.String(l.bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return l.s3Err("complete multipart upload", key, err)
	}
	completed = true
	return nil
}

// expectEOF reads r to its end: the verifier's check, and an error if r
// holds more than announced.
func expectEOF(r io.Reader) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	if n > 0 {
		return fmt.Errorf("%w: the content is longer than announced", ErrDigest)
	}
	if err == io.EOF {
		return nil
	}
	return err
}

func (l *s3Location) Remove(ctx context.Context, p string) error {
	_, err := l.c.DeleteObject(ctx, &sdks3.DeleteObjectInput{Bucket: aws.String(l.bucket), Key: aws.String(l.key(p))})
	if err != nil && !isNotFound(err) {
		return l.s3Err("delete", l.key(p), err)
	}
	return nil
}

// RemoveDirs: S3 has no directories.
func (l *s3Location) RemoveDirs(ctx context.Context, dirs []string) {}

// SetMeta: an object's metadata changes only with a copy; the manifest
// keeps mode and mtime.
func (l *s3Location) SetMeta(ctx context.Context, p string, e Entry) (bool, error) { return false, nil }

// Flush: every PutObject and completed upload is durable when answered.
func (l *s3Location) Flush(ctx context.Context) error { return nil }
