package agent

import (
	"context"
	"time"
)

// latest hands the newest value to one consumer: a value not taken yet is
// replaced by a newer one, so a slow consumer only ever sees the newest.
type latest[T any] chan T

func newLatest[T any]() latest[T] { return make(latest[T], 1) }

// offer replaces any value not taken yet with v.
func (l latest[T]) offer(v T) {
	for {
		select {
		case l <- v:
			return
		default:
		}
		select {
		case <-l:
		default:
		}
	}
}

// applyLatest applies each value offered to l, the newest first; a value
// whose apply fails is applied again every retry until it succeeds or a
// newer one comes. It returns when ctx ends.
func applyLatest[T any](ctx context.Context, l latest[T], retry time.Duration, apply func(context.Context, T) error) {
	var pending T
	again := (<-chan time.Time)(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case pending = <-l:
		case <-again:
		}
		again = nil
		if err := apply(ctx, pending); err != nil && ctx.Err() == nil {
			again = time.After(retry)
		}
	}
}
