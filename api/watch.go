package api

import "encoding/json"

// WatchEvent is one line of a watch (`GET /v1/<kind>?watch=true`): a
// change of an object, a bookmark, or the error that ends the stream.
type WatchEvent struct {
	// Type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
	Type string `json:"type"`
	// ResourceVersion is the revision of the change (for a bookmark, the
	// revision the watch has reached; none on the ADDED lines of the
	// objects that start a watch without a revision, which end with a
	// bookmark of the list's revision): resume after it.
	ResourceVersion int64 `json:"resourceVersion,omitempty,string"`
	// Object is the object as written (for DELETED, its last state; for
	// ERROR, an ErrorBody).
	Object json.RawMessage `json:"object,omitempty"`
}

// Watch event types.
const (
	WatchAdded    = "ADDED"
	WatchModified = "MODIFIED"
	WatchDeleted  = "DELETED"
	WatchBookmark = "BOOKMARK"
	WatchError    = "ERROR"
)

// ErrorExpired is the error code of a watch or list from a revision the
// store no longer keeps the changes after (HTTP 410): list again, and
// watch from the list's revision.
const ErrorExpired = "expired"

// ListMeta is the metadata of a list.
type ListMeta struct {
	// ResourceVersion is the store revision the list was read at (for a
	// list in pages, the first page's): watch from it.
	ResourceVersion int64 `json:"resourceVersion,omitempty,string"`
	// Continue, when set, reads the next page (`continue=`).
	Continue string `json:"continue,omitempty"`
	// RemainingItemCount, for a page read by offset (`offset=`), is how
	// many objects of the list come after it.
	RemainingItemCount *int64 `json:"remainingItemCount,omitempty"`
}
