package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// Multipart uploads live in the bucket, under internalDir/UPLOADID/: an
// upload.json with what CreateMultipartUpload was told, and one file per
// part ("part.00001"). The parts are ordinary files: they count against
// the disk, replicate like any file, and completing the upload makes the
// object from their blobs without copying a byte (store.Concat). Abort
// deletes the directory; uploads older than Config.UploadExpiry are
// collected by CollectUploads.

// Part size limits, as S3's.
const (
	minPartSize = 5 << 20
	maxPartNum  = 10000
)

// upload is the stored description of an unfinished upload.
type upload struct {
	Key         string            `json:"key"`
	ContentType string            `json:"content_type,omitempty"`
	Xattrs      map[string][]byte `json:"xattrs,omitempty"`
	Initiated   time.Time         `json:"initiated"`
	Initiator   string            `json:"initiator"`
	// Completed is set once CompleteMultipartUpload made the object, with
	// its ETag: completing again answers the same (as S3 does); the
	// record is collected completedKeep later.
	Completed     time.Time `json:"completed,omitzero"`
	CompletedETag string    `json:"completed_etag,omitempty"`
}

// completedKeep is how long a completed upload's record is kept, so that
// a client retrying its CompleteMultipartUpload gets the same answer.
const completedKeep = time.Hour

func uploadDir(id string) string { return internalDir + "/" + id }

func partPath(id string, n int) string { return fmt.Sprintf("%s/part.%05d", uploadDir(id), n) }

// validUploadID reports whether id has the shape of an id Cairn makes.
func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// loadUpload reads upload id of bucket and checks it is for key.
func (h *Handler) loadUpload(ctx context.Context, bucket, key, id string) (upload, error) {
	var u upload
	if !validUploadID(id) {
		return u, errNoSuchUpload
	}
	obj, err := h.st.Open(ctx, bucket, uploadDir(id)+"/upload.json")
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotDir) {
			return u, errNoSuchUpload
		}
		return u, err
	}
	defer obj.Close()
	b, err := io.ReadAll(io.NewSectionReader(obj, 0, obj.Info().Size))
	if err != nil {
		return u, err
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return u, fmt.Errorf("upload %s: %w", id, err)
	}
	if key != "" && u.Key != key {
		return u, errNoSuchUpload
	}
	return u, nil
}

// openUpload is loadUpload for the calls that add to or read an upload
// in progress: a completed one no longer exists for them.
func (h *Handler) openUpload(ctx context.Context, bucket, key, id string) (upload, error) {
	u, err := h.loadUpload(ctx, bucket, key, id)
	if err == nil && !u.Completed.IsZero() {
		return u, errNoSuchUpload
	}
	return u, err
}

func (h *Handler) createUpload(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key)
	if err == nil {
		err = h.authorizeACL(r, rq, b)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	x, err := objectXattrs(r.Header)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	var idb [16]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	u := upload{Key: rq.key, ContentType: r.Header.Get("Content-Type"), Xattrs: x, Initiated: h.now().UTC(), Initiator: rq.principal.CanonicalID()}
	if err := h.saveUpload(ctx, rq.bucket, id, u); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	writeXML(w, r, http.StatusOK, struct {
		XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ InitiateMultipartUploadResult"`
		Bucket   string   `xml:"Bucket"`
		Key      string   `xml:"Key"`
		UploadID string   `xml:"UploadId"`
	}{Bucket: rq.bucket, Key: rq.key, UploadID: id})
}

// partNumber parses the partNumber parameter.
func partNumber(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPartNum {
		return 0, errorf(http.StatusBadRequest, "InvalidArgument", "Part number must be an integer between 1 and %d, inclusive", maxPartNum)
	}
	return n, nil
}

func (h *Handler) uploadPart(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if _, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	n, err := partNumber(rq.query.Get("partNumber"))
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	id := rq.query.Get("uploadId")
	if _, err := h.openUpload(ctx, rq.bucket, rq.key, id); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if src := r.Header.Get("x-amz-copy-source"); src != "" {
		h.uploadPartCopy(w, r, rq, partPath(id, n), src)
		return
	}
	want, err := contentMD5(r.Header)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	body, err := h.body(r, rq)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	rd := newBodyReader(body)
	info, _, err := h.st.Put(ctx, rq.bucket, partPath(id, n), rd, store.PutOptions{Size: payloadSize(r), ContentMD5: want,
		ContentSHA256: takePayloadHash(body)})
	if err != nil {
		h.writeError(w, r, rq, rd.cause(err))
		return
	}
	w.Header().Set("ETag", etag(info.ETag))
	w.WriteHeader(http.StatusOK)
}

// uploadPartCopy makes a part from (a range of) another object.
func (h *Handler) uploadPartCopy(w http.ResponseWriter, r *http.Request, rq *request, part, src string) {
	ctx := r.Context()
	sb, sk, sv, err := copySource(src)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	source, err := h.openCopySource(ctx, rq, sb, sk, sv)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	defer source.close()
	obj, info := source.obj, source.info
	if source.version != "" {
		w.Header().Set("x-amz-copy-source-version-id", source.version)
	}
	if err := checkConditions(r.Header, info, "x-amz-copy-source-"); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	var out store.ObjectInfo
	if rs := r.Header.Get("x-amz-copy-source-range"); rs != "" {
		// Unlike a GET's Range, the copy range must lie inside the source.
		var a, b int64
		if _, serr := fmt.Sscanf(rs, "bytes=%d-%d", &a, &b); serr != nil || a < 0 || b < a || b >= info.Size {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidRange",
				"The x-amz-copy-source-range value %q is not valid for a source of %d bytes", rs, info.Size))
			return
		}
		off, n := a, b-a+1
		out, _, err = h.st.Put(ctx, rq.bucket, part, io.NewSectionReader(obj, off, n), store.PutOptions{Size: n})
	} else if !source.live {
		// A version or a snapshot's file: read and written again.
		out, _, err = h.st.Put(ctx, rq.bucket, part, io.NewSectionReader(obj, 0, info.Size), store.PutOptions{Size: info.Size})
	} else {
		out, _, err = h.st.Concat(ctx, rq.bucket, part, []store.ObjectRef{{Bucket: sb, Path: sk}}, info.ETag, store.PutOptions{})
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	writeXML(w, r, http.StatusOK, struct {
		XMLName      xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyPartResult"`
		LastModified string   `xml:"LastModified"`
		ETag         string   `xml:"ETag"`
	}{LastModified: xmlTime(out.ModTime), ETag: etag(out.ETag)})
}

// pages calls fn with every page of a listing of bucket.
func (h *Handler) pages(ctx context.Context, bucket string, opts store.ListOptions, fn func(store.ListResult)) error {
	for {
		res, err := h.st.List(ctx, bucket, opts)
		if err != nil {
			return err
		}
		fn(res)
		if !res.Truncated {
			return nil
		}
		opts.StartAfter = res.NextToken
	}
}

// parts lists the parts of upload id, by number.
func (h *Handler) parts(ctx context.Context, bucket, id string) (map[int]store.ObjectInfo, error) {
	out := map[int]store.ObjectInfo{}
	prefix := uploadDir(id) + "/part."
	err := h.pages(ctx, bucket, store.ListOptions{Prefix: prefix, Limit: 1000}, func(res store.ListResult) {
		for _, e := range res.Entries {
			if n, err := strconv.Atoi(strings.TrimPrefix(e.Path, prefix)); err == nil {
				out[n] = e
			}
		}
	})
	return out, err
}

func (h *Handler) completeUpload(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if _, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	id := rq.query.Get("uploadId")
	u, err := h.loadUpload(ctx, rq.bucket, rq.key, id)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if !u.Completed.IsZero() {
		// A retried completion: the object was made already.
		h.writeCompleted(w, r, rq, u.CompletedETag)
		return
	}
	var req struct {
		Parts []struct {
			PartNumber int    `xml:"PartNumber"`
			ETag       string `xml:"ETag"`
		} `xml:"Part"`
	}
	body, err := h.body(r, rq)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if err := readXML(body, 4<<20, &req); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if len(req.Parts) == 0 {
		h.writeError(w, r, rq, errMalformedXML)
		return
	}
	have, err := h.parts(ctx, rq.bucket, id)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	md := md5.New()
	srcs := make([]store.ObjectRef, 0, len(req.Parts))
	// Order first, then each part's presence and ETag, then sizes, as S3
	// reports them. A part number may be listed twice in a row: a client
	// re-sent the part and the first send finished last. The part stored
	// is the upload that finished last; the list names it once among its
	// ETags, and the object takes it once.
	for i := 1; i < len(req.Parts); i++ {
		if req.Parts[i].PartNumber < req.Parts[i-1].PartNumber {
			h.writeError(w, r, rq, errInvalidPartOrder)
			return
		}
	}
	dedup := req.Parts[:0:0]
	for i := 0; i < len(req.Parts); {
		j, match := i, -1
		for ; j < len(req.Parts) && req.Parts[j].PartNumber == req.Parts[i].PartNumber; j++ {
			if info, ok := have[req.Parts[j].PartNumber]; ok && strings.Trim(strings.TrimSpace(req.Parts[j].ETag), `"`) == info.ETag {
				match = j
			}
		}
		if match < 0 {
			h.writeError(w, r, rq, errInvalidPart)
			return
		}
		dedup = append(dedup, req.Parts[match])
		i = j
	}
	req.Parts = dedup
	for i, p := range req.Parts {
		info, ok := have[p.PartNumber]
		if !ok || strings.Trim(strings.TrimSpace(p.ETag), `"`) != info.ETag {
			h.writeError(w, r, rq, errInvalidPart)
			return
		}
		if i < len(req.Parts)-1 && info.Size < minPartSize {
			h.writeError(w, r, rq, errEntityTooSmall)
			return
		}
		sum := hexMD5(info.ETag)
		if sum == nil {
			// A part copied from a multipart object has a composite ETag.
			s := md5.Sum([]byte(info.ETag))
			sum = s[:]
		}
		md.Write(sum)
		srcs = append(srcs, store.ObjectRef{Bucket: rq.bucket, Path: info.Path})
	}
	tag := fmt.Sprintf("%s-%d", hex.EncodeToString(md.Sum(nil)), len(req.Parts))
	x := u.Xattrs
	if x == nil {
		x = map[string][]byte{}
	}
	info, _, err := h.st.Concat(ctx, rq.bucket, rq.key, srcs, tag, store.PutOptions{ContentType: u.ContentType, Xattrs: x})
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	// The parts go; the record stays a while, marked completed.
	h.removeParts(ctx, rq.bucket, id)
	u.Completed, u.CompletedETag = h.now().UTC(), info.ETag
	if err := h.saveUpload(ctx, rq.bucket, id, u); err != nil {
		h.log.Warn("completed multipart upload not marked", "bucket", rq.bucket, "upload", id, "err", err)
	}
	if b, err := h.st.Bucket(ctx, rq.bucket); err == nil {
		versionHeader(w.Header(), b, info)
	}
	h.writeCompleted(w, r, rq, info.ETag)
}

func (h *Handler) writeCompleted(w http.ResponseWriter, r *http.Request, rq *request, tag string) {
	writeXML(w, r, http.StatusOK, struct {
		XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
		Location string   `xml:"Location"`
		Bucket   string   `xml:"Bucket"`
		Key      string   `xml:"Key"`
		ETag     string   `xml:"ETag"`
	}{Location: "/" + rq.bucket + "/" + rq.key, Bucket: rq.bucket, Key: rq.key, ETag: etag(tag)})
}

// saveUpload writes an upload's record.
func (h *Handler) saveUpload(ctx context.Context, bucket, id string, u upload) error {
	b, _ := json.Marshal(u)
	_, _, err := h.st.Put(ctx, bucket, uploadDir(id)+"/upload.json", bytes.NewReader(b),
		store.PutOptions{Size: int64(len(b)), ContentType: "application/json"})
	return err
}

// removeParts deletes an upload's parts.
func (h *Handler) removeParts(ctx context.Context, bucket, id string) {
	have, err := h.parts(ctx, bucket, id)
	if err != nil {
		return
	}
	for _, p := range have {
		if err := h.st.Delete(ctx, bucket, p.Path, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
			h.log.Warn("multipart part not deleted", "bucket", bucket, "path", p.Path, "err", err)
		}
	}
	// A bucket with a trash (or versioned) kept them: they are nobody's.
	h.dropHiddenTrash(ctx, bucket, uploadDir(id)+"/")
}

// removeUpload deletes an upload's files and directory, and the upload
// directory itself when it is left empty. Failures are logged: what is
// left is collected by CollectUploads.
func (h *Handler) removeUpload(ctx context.Context, bucket, id string) {
	h.removeParts(ctx, bucket, id)
	for _, p := range []string{uploadDir(id) + "/upload.json", uploadDir(id), internalDir} {
		if err := h.st.Delete(ctx, bucket, p, ""); err != nil && !errors.Is(err, store.ErrNotFound) &&
			!errors.Is(err, store.ErrNotEmpty) {
			h.log.Warn("multipart upload not fully removed", "bucket", bucket, "path", p, "err", err)
		}
	}
	h.dropHiddenTrash(ctx, bucket, uploadDir(id)+"/")
}

func (h *Handler) abortUpload(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if _, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	id := rq.query.Get("uploadId")
	if _, err := h.openUpload(ctx, rq.bucket, rq.key, id); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	h.removeUpload(ctx, rq.bucket, id)
	w.WriteHeader(http.StatusNoContent)
}

type partXML struct {
	PartNumber   int    `xml:"PartNumber"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
}

func (h *Handler) listParts(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionList, rq.bucket, rq.key)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	id := rq.query.Get("uploadId")
	u, err := h.openUpload(ctx, rq.bucket, rq.key, id)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	have, err := h.parts(ctx, rq.bucket, id)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	maxParts := 1000
	if v := rq.query.Get("max-parts"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			maxParts = min(n, 1000)
		}
	}
	marker, _ := strconv.Atoi(rq.query.Get("part-number-marker"))
	nums := make([]int, 0, len(have))
	for n := range have {
		if n > marker {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	out := struct {
		XMLName              xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListPartsResult"`
		Bucket               string    `xml:"Bucket"`
		Key                  string    `xml:"Key"`
		UploadID             string    `xml:"UploadId"`
		Initiator            owner     `xml:"Initiator"`
		Owner                owner     `xml:"Owner"`
		StorageClass         string    `xml:"StorageClass"`
		PartNumberMarker     int       `xml:"PartNumberMarker"`
		NextPartNumberMarker int       `xml:"NextPartNumberMarker"`
		MaxParts             int       `xml:"MaxParts"`
		IsTruncated          bool      `xml:"IsTruncated"`
		Parts                []partXML `xml:"Part"`
	}{Bucket: rq.bucket, Key: rq.key, UploadID: id, Initiator: owner{ID: u.Initiator, DisplayName: h.displayName(u.Initiator)},
		Owner: ownerOf(b, h.displayName), StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: maxParts, Parts: []partXML{}}
	for i, n := range nums {
		if i == maxParts {
			out.IsTruncated = true
			break
		}
		p := have[n]
		out.Parts = append(out.Parts, partXML{PartNumber: n, LastModified: xmlTime(p.ModTime), ETag: etag(p.ETag), Size: p.Size})
		out.NextPartNumberMarker = n
	}
	writeXML(w, r, http.StatusOK, out)
}

// uploads returns the unfinished uploads of bucket: id → description.
func (h *Handler) uploads(ctx context.Context, bucket string) (map[string]upload, error) {
	out := map[string]upload{}
	err := h.pages(ctx, bucket, store.ListOptions{Prefix: internalDir + "/", Delimiter: "/", Limit: 1000}, func(res store.ListResult) {
		for _, p := range res.CommonPrefixes {
			id := strings.TrimSuffix(strings.TrimPrefix(p, internalDir+"/"), "/")
			if u, err := h.loadUpload(ctx, bucket, "", id); err == nil {
				out[id] = u
			}
		}
	})
	return out, err
}

func (h *Handler) listUploads(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionList, rq.bucket, rq.query.Get("prefix"))
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	all, err := h.uploads(ctx, rq.bucket)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	type uploadXML struct {
		Key          string `xml:"Key"`
		UploadID     string `xml:"UploadId"`
		Initiator    owner  `xml:"Initiator"`
		Owner        owner  `xml:"Owner"`
		StorageClass string `xml:"StorageClass"`
		Initiated    string `xml:"Initiated"`
	}
	prefix, keyMarker, idMarker := rq.query.Get("prefix"), rq.query.Get("key-marker"), rq.query.Get("upload-id-marker")
	maxUploads := 1000
	if v := rq.query.Get("max-uploads"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			maxUploads = min(n, 1000)
		}
	}
	var list []uploadXML
	for id, u := range all {
		if !u.Completed.IsZero() || !strings.HasPrefix(u.Key, prefix) {
			continue
		}
		// Resume after (key-marker, upload-id-marker), in the order below.
		if keyMarker != "" && (u.Key < keyMarker || u.Key == keyMarker && id <= idMarker) {
			continue
		}
		list = append(list, uploadXML{Key: u.Key, UploadID: id, Initiator: owner{ID: u.Initiator, DisplayName: h.displayName(u.Initiator)},
			Owner: ownerOf(b, h.displayName), StorageClass: "STANDARD", Initiated: xmlTime(u.Initiated)})
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].Key < list[j].Key || list[i].Key == list[j].Key && list[i].UploadID < list[j].UploadID
	})
	out := struct {
		XMLName            xml.Name    `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListMultipartUploadsResult"`
		Bucket             string      `xml:"Bucket"`
		KeyMarker          string      `xml:"KeyMarker"`
		UploadIDMarker     string      `xml:"UploadIdMarker"`
		NextKeyMarker      string      `xml:"NextKeyMarker,omitempty"`
		NextUploadIDMarker string      `xml:"NextUploadIdMarker,omitempty"`
		Prefix             string      `xml:"Prefix"`
		MaxUploads         int         `xml:"MaxUploads"`
		IsTruncated        bool        `xml:"IsTruncated"`
		Uploads            []uploadXML `xml:"Upload"`
	}{Bucket: rq.bucket, KeyMarker: keyMarker, UploadIDMarker: idMarker, Prefix: prefix, MaxUploads: maxUploads}
	if len(list) > maxUploads {
		list = list[:maxUploads]
		out.IsTruncated = true
		out.NextKeyMarker, out.NextUploadIDMarker = list[len(list)-1].Key, list[len(list)-1].UploadID
	}
	out.Uploads = list
	writeXML(w, r, http.StatusOK, out)
}

// abortAllUploads removes the uploads of bucket initiated before
// olderThan (every upload when it is zero).
func (h *Handler) abortAllUploads(ctx context.Context, bucket string, olderThan time.Time) int {
	all, err := h.uploads(ctx, bucket)
	if err != nil {
		return 0
	}
	n := 0
	for id, u := range all {
		done := !u.Completed.IsZero() && u.Completed.Before(h.now().Add(-completedKeep))
		if olderThan.IsZero() || u.Initiated.Before(olderThan) || done {
			h.removeUpload(ctx, bucket, id)
			n++
		}
	}
	return n
}

// CollectUploads removes, in every bucket, the multipart uploads older
// than Config.UploadExpiry and returns how many. The node calls it
// periodically; it is idempotent, so several nodes may.
func (h *Handler) CollectUploads(ctx context.Context) int {
	buckets, err := h.st.Buckets(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, b := range buckets {
		if _, err := h.st.Stat(ctx, b.Name, internalDir); err != nil {
			continue
		}
		n += h.abortAllUploads(ctx, b.Name, h.now().Add(-h.cfg.UploadExpiry))
	}
	return n
}
