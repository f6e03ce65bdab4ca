package client

import "time"

// BucketInfo describes a bucket and its options. It mirrors the server's
// bucket JSON.
type BucketInfo struct {
	// Name is the bucket's name, the first segment of every URL path in it.
	Name string `json:"name"`
	// Public buckets can be read (GET/HEAD) without a key.
	Public bool `json:"public"`
	// ChecksumSidecars makes GET PATH.md5 and PATH.sha256 answer checksums.
	ChecksumSidecars bool `json:"checksum_sidecars"`
	// CacheControl is sent as the Cache-Control header of every file.
	CacheControl string `json:"cache_control,omitempty"`
	// Created is set by the server; ignored by CreateBucket.
	Created time.Time `json:"created"`
	// Replicas is the replication factor R: 0 = cluster default (3),
	// Mirror (-1) = every data node.
	Replicas int `json:"replicas"`
	// WriteQuorum is W, the copies a write waits for: 0 = majority of R.
	WriteQuorum int `json:"write_quorum"`
	// Strict refuses (503) a write that cannot make W copies; without it
	// a write goes on with the copies it can make, under-replicated.
	Strict bool `json:"strict"`
	// UID, GID, FileMode and DirMode are the owner and modes given to
	// files and directories written over HTTP or the CLI (the mount
	// writes as its caller). Modes 0: 0644 and 0755.
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
	FileMode uint32 `json:"file_mode"`
	DirMode  uint32 `json:"dir_mode"`
	// TrashSeconds is how long the bucket's trash keeps deleted and
	// overwritten files (Client.TrashList); 0: no trash. At most
	// MaxTrashSeconds.
	TrashSeconds int64 `json:"trash_seconds,omitempty"`
}

// MaxTrashSeconds is the longest trash retention a bucket takes: 3650 days.
const MaxTrashSeconds = 3650 * 24 * 3600

// BucketUpdate is a partial change of a bucket's options: nil fields are
// left as they are (PATCH semantics).
type BucketUpdate struct {
	// Public, when non-nil, sets BucketInfo.Public.
	Public *bool `json:"public,omitempty"`
	// ChecksumSidecars, when non-nil, sets BucketInfo.ChecksumSidecars.
	ChecksumSidecars *bool `json:"checksum_sidecars,omitempty"`
	// CacheControl, when non-nil, sets BucketInfo.CacheControl ("" clears it).
	CacheControl *string `json:"cache_control,omitempty"`
	// Replicas, when non-nil, sets BucketInfo.Replicas.
	Replicas *int `json:"replicas,omitempty"`
	// WriteQuorum, when non-nil, sets BucketInfo.WriteQuorum.
	WriteQuorum *int `json:"write_quorum,omitempty"`
	// Strict, when non-nil, sets BucketInfo.Strict.
	Strict *bool `json:"strict,omitempty"`
	// UID, GID, FileMode and DirMode, when non-nil, set BucketInfo's.
	UID      *uint32 `json:"uid,omitempty"`
	GID      *uint32 `json:"gid,omitempty"`
	FileMode *uint32 `json:"file_mode,omitempty"`
	DirMode  *uint32 `json:"dir_mode,omitempty"`
	// TrashSeconds, when non-nil, sets BucketInfo.TrashSeconds (0 turns
	// the trash off; what it holds stays until it expires or is emptied).
	TrashSeconds *int64 `json:"trash_seconds,omitempty"`
}

// Mirror as BucketInfo.Replicas keeps a copy of every file on every node.
const Mirror = -1

// ObjectInfo describes a file or directory. It mirrors the server's object
// JSON; when built from response headers (Get, Stat) Mode is 0 and ModTime
// has the one-second precision of Last-Modified, unless the server also sent
// X-Cairn-Mtime.
type ObjectInfo struct {
	// Bucket is the bucket's name.
	Bucket string `json:"bucket"`
	// Path is inside the bucket, without a leading slash; directories have
	// no trailing slash.
	Path string `json:"path"`
	// IsDir is true for a directory.
	IsDir bool `json:"is_dir"`
	// Size is the content length in bytes.
	Size int64 `json:"size"`
	// ModTime is the file's modification time (as sent with X-Cairn-Mtime, or
	// the time of the write).
	ModTime time.Time `json:"mtime"`
	// ETag is the hex MD5 of the content, unquoted.
	ETag string `json:"etag,omitempty"`
	// SHA256 is the hex SHA-256 of the content.
	SHA256 string `json:"sha256,omitempty"`
	// ContentType is the stored content type.
	ContentType string `json:"content_type,omitempty"`
	// Mode holds the POSIX permission bits.
	Mode uint32 `json:"mode"`
	// Copies and CopiesWanted are set in the answer to a write that was
	// acknowledged under-replicated (nodes were down): the copies made and
	// the copies the bucket wants. Repair makes the missing ones.
	Copies       int `json:"copies,omitempty"`
	CopiesWanted int `json:"copies_wanted,omitempty"`
}

// ListResult is one page of a listing.
type ListResult struct {
	// Entries are files (and, in some listings, directories) in S3 order.
	Entries []ObjectInfo `json:"entries"`
	// CommonPrefixes are the subdirectories of a non-recursive listing, as
	// full paths inside the bucket with a trailing slash ("a/b/").
	CommonPrefixes []string `json:"common_prefixes,omitempty"`
	// Truncated reports that more entries follow; pass NextToken as
	// ListOptions.After to get them.
	Truncated bool `json:"truncated"`
	// NextToken continues a truncated listing.
	NextToken string `json:"next_token,omitempty"`
}

// PutOptions are the optional parts of a Put.
type PutOptions struct {
	// ContentType is stored and served back; empty lets the server pick by
	// extension.
	ContentType string
	// ModTime is sent as X-Cairn-Mtime; zero lets the server use the time of
	// the write.
	ModTime time.Time
	// Mode is sent as X-Cairn-Mode (permission bits); 0 lets the server
	// default to 0644.
	Mode uint32
	// IfMatch, if set, makes the write fail with ErrPrecondition unless the
	// current file's ETag (hex MD5) equals it.
	IfMatch string
	// IfNoneMatchAny makes the write fail with ErrPrecondition if a file
	// already exists at the path.
	IfNoneMatchAny bool
}

// ListOptions selects a page of a listing.
type ListOptions struct {
	// Recursive lists every file below the directory, not just its children.
	Recursive bool
	// After continues a listing: the NextToken of the previous page.
	After string
	// Limit is the maximum number of entries plus common prefixes in a page;
	// 0 lets the server choose (1000). The server caps it at 10000.
	Limit int
	// Prefix keeps only names below the directory that start with it.
	Prefix string
}
