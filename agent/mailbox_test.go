package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A value whose apply fails is applied again without a newer one being
// offered; a newer one replaces it, and a success ends the retries.
func TestApplyLatestRetriesUntilApplied(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newLatest[string]()
	applied := make(chan string, 100)
	failuresLeft := map[string]int{"a": 2}
	go applyLatest(ctx, l, time.Millisecond, func(_ context.Context, v string) error {
		applied <- v
		if failuresLeft[v] > 0 {
			failuresLeft[v]--
			return errors.New("not yet")
		}
		return nil
	})
	l.offer("a")
	for _, want := range []string{"a", "a", "a"} { // two failures, then it holds
		if got := <-applied; got != want {
			t.Fatalf("applied %q, want %q", got, want)
		}
	}
	l.offer("b")
	if got := <-applied; got != "b" {
		t.Fatalf("applied %q, want the newer b", got)
	}
	select {
	case extra := <-applied:
		t.Fatalf("applied %q again after it held", extra)
	case <-time.After(50 * time.Millisecond):
	}
}

// offer keeps only the newest value not taken yet.
func TestLatestKeepsTheNewest(t *testing.T) {
	l := newLatest[int]()
	for i := range 5 {
		l.offer(i)
	}
	if got := <-l; got != 4 {
		t.Fatalf("took %d, want 4", got)
	}
	select {
	case v := <-l:
		t.Fatalf("another value %d left", v)
	default:
	}
}
