package s3

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// Access control beyond internal/access's grants, as S3 has it:
//
//   - a bucket's canned ACL: private, public-read (store.BucketInfo.Public),
//     public-read-write, authenticated-read (store.BucketInfo.ACL);
//   - an object's canned ACL, when one was given (x-amz-acl on PutObject,
//     CopyObject, CreateMultipartUpload, or PutObjectAcl): the extended
//     attribute xattrACL, which replaces the bucket's for reads of that
//     object (a private object in a public-read bucket is private; a
//     public-read object in a private bucket is public). Objects without
//     one follow their bucket: a public-read bucket serves its files to
//     anyone, which is what a web cluster's public bucket is for (S3
//     would keep them private; ceph/s3-tests
//     test_access_bucket_publicread_object_publicread checks that, and
//     fails here by design);
//   - a bucket policy (xattrPolicy on the bucket's root, evaluated by
//     access.Policy): an explicit Deny wins over grants, an Allow adds to
//     them. The admin key is above policies.
//
// The native API applies bucket ACLs and an object's private ACL; bucket
// policies are S3's only.
const (
	xattrACL    = "user.cairn.s3.acl"
	xattrPolicy = "user.cairn.s3.policy"
)

// cannedACL maps a canned ACL to a bucket's public flag and ACL field.
func cannedACL(acl string) (public bool, field string, err error) {
	switch acl {
	case "", "private":
		return false, "", nil
	case "public-read":
		return true, "", nil
	case "public-read-write":
		return true, acl, nil
	case "authenticated-read":
		return false, acl, nil
	}
	return false, "", errorf(http.StatusNotImplemented, "NotImplemented",
		"canned ACL %q is not supported: use private, public-read, public-read-write or authenticated-read", acl)
}

// bucketACL names a bucket's canned ACL.
func bucketACL(b store.BucketInfo) string {
	switch {
	case b.ACL != "":
		return b.ACL
	case b.Public:
		return "public-read"
	}
	return "private"
}

// resourceOf is the access.Resource of key in bucket b, whose object has
// the canned ACL objACL ("" when it has none and follows the bucket).
func resourceOf(b store.BucketInfo, key, objACL string) access.Resource {
	acl := bucketACL(b)
	if objACL != "" && key != "" {
		acl = objACL
	}
	res := access.Resource{Bucket: b.Name, Path: key, Owner: b.Owner}
	switch acl {
	case "public-read":
		res.PublicRead = true
	case "public-read-write":
		res.PublicRead = true
	case "authenticated-read":
		res.AuthenticatedRead = true
	}
	// Writing follows the bucket, whatever an object's ACL says.
	res.PublicWrite = b.ACL == "public-read-write"
	return res
}

// policyCache keeps parsed bucket policies by their text.
type policyCache struct {
	mu sync.Mutex
	m  map[string]*access.Policy
}

func (c *policyCache) parse(doc string) (*access.Policy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[doc]; ok {
		return p, nil
	}
	p, err := access.ParsePolicy([]byte(doc))
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) > 1024 {
		c.m = map[string]*access.Policy{}
	}
	c.m[doc] = p
	return p, nil
}

// bucketPolicy returns the policy of bucket, or nil.
func (h *Handler) bucketPolicy(ctx context.Context, bucket string) *access.Policy {
	info, err := h.st.Stat(ctx, bucket, "")
	if err != nil {
		return nil
	}
	doc, ok := info.Xattrs[xattrPolicy]
	if !ok {
		return nil
	}
	p, err := h.policies.parse(string(doc))
	if err != nil {
		return nil
	}
	return p
}

// policyAction names act on key for a policy: the generic name of the
// action, as a grant sees it.
func policyAction(act access.Action, key string) string {
	switch act {
	case access.ActionRead:
		if key == "" {
			return "s3:GetBucketAcl"
		}
		return "s3:GetObject"
	case access.ActionList:
		return "s3:ListBucket"
	case access.ActionWrite:
		return "s3:PutObject"
	case access.ActionDelete:
		if key == "" {
			return "s3:DeleteBucket"
		}
		return "s3:DeleteObject"
	}
	return "s3:PutBucketAcl"
}

// opActions maps an operation to its IAM action name where it differs
// from "s3:" + the operation's name.
var opActions = map[string]string{
	"HeadObject": "s3:GetObject", "HeadObjectVersion": "s3:GetObjectVersion", "HeadBucket": "s3:ListBucket", "ListObjects": "s3:ListBucket",
	"ListObjectsV2": "s3:ListBucket", "ListObjectVersions": "s3:ListBucketVersions",
	"ListParts": "s3:ListMultipartUploadParts", "ListMultipartUploads": "s3:ListBucketMultipartUploads",
	"CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject", "UploadPartCopy": "s3:PutObject",
	"CompleteMultipartUpload": "s3:PutObject", "CopyObject": "s3:PutObject", "DeleteObjects": "s3:DeleteObject",
	"GetBucketLocation": "s3:GetBucketLocation", "CreateBucket": "s3:CreateBucket",
}

// policyActions are the names a policy is checked against for the
// request's operation and act: the operation's own (s3:DeleteBucket,
// s3:PutObjectAcl, ...) and the generic one.
func policyActions(op string, act access.Action, key string) []string {
	generic := policyAction(act, key)
	specific, ok := opActions[op]
	if !ok && op != "" {
		specific = "s3:" + op
	}
	if specific == "" || specific == generic {
		return []string{generic}
	}
	return []string{specific, generic}
}

// authorizeObject decides act on bucket b's key for the request, with the
// object's ACL and the bucket's policy. prefix is a listing's prefix
// (s3:prefix).
func (h *Handler) authorizeObject(ctx context.Context, rq *request, act access.Action, b store.BucketInfo, key, objACL, prefix string) error {
	err := h.auth.Authorize(rq.principal, act, resourceOf(b, key, objACL))
	if rq.principal.Admin {
		return err
	}
	if p := h.bucketPolicy(ctx, b.Name); p != nil {
		arn := "arn:aws:s3:::" + b.Name
		if key != "" && act != access.ActionList {
			arn += "/" + key
		}
		effect := access.NoEffect
		for _, a := range policyActions(rq.op, act, key) {
			switch p.Decide(access.PolicyRequest{Principal: rq.principal.CanonicalID(), Action: a, Resource: arn, Prefix: prefix}) {
			case access.Denied:
				return errorf(http.StatusForbidden, "AccessDenied", "Access Denied: the bucket policy denies it")
			case access.Allowed:
				effect = access.Allowed
			}
		}
		if effect == access.Allowed {
			return nil
		}
	}
	if err != nil && rq.principal.Anonymous() {
		return errAnonymousForbidden
	}
	return err
}

// objectACL returns an object's canned ACL ("" if it follows its bucket).
func objectACL(info store.ObjectInfo) string { return string(info.Xattrs[xattrACL]) }

// serveBucketPolicy serves PUT, GET and DELETE /BUCKET?policy.
func (h *Handler) serveBucketPolicy(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.st.Bucket(ctx, rq.bucket)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	// Only the owner (or a key with admin on the bucket) manages policies.
	if err := h.auth.Authorize(rq.principal, access.ActionAdmin, access.Resource{Bucket: b.Name, Owner: b.Owner}); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	switch r.Method {
	case http.MethodGet:
		info, err := h.st.Stat(ctx, rq.bucket, "")
		if err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		doc, ok := info.Xattrs[xattrPolicy]
		if !ok {
			h.writeError(w, r, rq, errorf(http.StatusNotFound, "NoSuchBucketPolicy", "The bucket policy does not exist"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(doc)
	case http.MethodPut:
		body, err := h.body(r, rq)
		if err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		doc, err := io.ReadAll(io.LimitReader(body, 20<<10+1))
		if err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		if len(doc) > 20<<10 {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "PolicyTooLarge", "Policies must be at most 20 KB"))
			return
		}
		if _, err := access.ParsePolicy(doc); err != nil {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "MalformedPolicy", "%v", err))
			return
		}
		if _, err := h.st.SetAttrs(ctx, rq.bucket, "", store.SetAttrs{Xattrs: map[string][]byte{xattrPolicy: doc}}); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		if _, err := h.st.SetAttrs(ctx, rq.bucket, "", store.SetAttrs{Xattrs: map[string][]byte{xattrPolicy: nil}}); err != nil && !errors.Is(err, store.ErrNotFound) {
			h.writeError(w, r, rq, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		h.writeError(w, r, rq, errMethodNotAllowed)
	}
}

// authorizeACL checks that the request may give an object the canned ACL
// of its x-amz-acl header: anything but private widens who may read it,
// which needs what PutObjectAcl needs (the bucket's owner, or admin on it).
func (h *Handler) authorizeACL(r *http.Request, rq *request, b store.BucketInfo) error {
	if acl := r.Header.Get("x-amz-acl"); acl == "" || acl == "private" {
		return nil
	}
	return h.auth.Authorize(rq.principal, access.ActionAdmin, access.Resource{Bucket: b.Name, Owner: b.Owner})
}

// openCopySource opens a copy's source (a live key, a version of it, or
// a file of a snapshot) and checks that the request may read it: its
// bucket's ACL and policy and the object's own ACL, as GetObject does. A
// directory is NoSuchKey. The caller closes the source.
func (h *Handler) openCopySource(ctx context.Context, rq *request, bucket, key, versionID string) (source, error) {
	b, err := h.st.Bucket(ctx, bucket)
	if err != nil {
		return source{}, err
	}
	src, err := h.openSource(ctx, b, key, versionID)
	if err == nil && src.obj == nil {
		err = store.ErrNotFound // a directory is no object to copy
	}
	if err != nil {
		if aerr := h.authorizeObject(ctx, rq, access.ActionRead, b, src.path, "", ""); aerr != nil {
			return source{}, aerr
		}
		return source{}, err
	}
	if err := h.authorizeObject(ctx, rq, access.ActionRead, b, src.path, objectACL(src.info), ""); err != nil {
		src.close()
		return source{}, err
	}
	return src, nil
}
