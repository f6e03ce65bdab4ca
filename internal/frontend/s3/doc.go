// Package s3 serves the S3 API over the store, on the node's public
// listener beside the native HTTP API (which routes a request here when
// IsS3 says so; the rule is in docs/s3.md).
//
// It is a protocol adapter like httpapi: parse the request (path-style
// /BUCKET/KEY, or virtual-hosted BUCKET.Domain), authenticate (a SigV4
// header or presigned query checked by internal/access/sigv4 with the
// secrets internal/access knows; a Bearer key; or anonymous), authorize
// with internal/access (grants per bucket and prefix, the bucket's owner,
// public-read buckets), call store.Store, and answer S3's XML, errors
// included (one table: errors.go).
//
// An S3 bucket is a Cairn bucket and a key is a path: the same objects
// appear over HTTP, S3 and the mount. Keys that are not valid paths
// ("a//b", "./x") are InvalidArgument; a key ending in "/" is a directory
// (PUT of an empty body makes it, GET answers an empty object if it
// exists). Object headers S3 keeps (x-amz-meta-*, Cache-Control,
// Content-Disposition, Content-Encoding, Content-Language, Expires) are
// the file's extended attributes named "user.cairn.<header>".
//
// CopyObject, UploadPartCopy without a range and CompleteMultipartUpload
// copy no bytes: the new file names the sources' blobs (store.Concat).
// Multipart uploads keep their parts as files under the bucket's
// ".cairn-uploads/UPLOADID/" (multipart.go), left out of S3 listings.
//
// Versioning (versioning.go) is the bucket's trash kept without expiry
// (store.Versions): PutBucketVersioning Enabled, ListObjectVersions with
// delete markers, and GET, HEAD, DELETE, GetObjectAcl and copy sources by
// versionId. A bucket that is not versioned answers every object as
// version "null".
//
// The keys under ".snapshots/NAME/" of a bucket read its snapshot NAME,
// read-only (snapshots.go); listings without that prefix hide it, as the
// mount does.
//
// ACLs are canned, per bucket and per object (acl.go).
package s3
