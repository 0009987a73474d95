package server

import (
	"time"
)

// ViewConfig tunes the server's view of the store.
type ViewConfig struct {
	// Resync is how often the view reads the feed even when no commit
	// was heard of (a notification lost).
	Resync time.Duration
}
