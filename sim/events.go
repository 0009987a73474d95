package sim

import (
	"container/heap"
	"time"
)

// eventKind is what happens in the world at an instant.
type eventKind int

const (
	// launchAnswered: a launch call's answer arrives (an instance, or a
	// capacity error).
	launchAnswered eventKind = iota
	// agentJoins: a launched machine's agent joins.
	agentJoins
	// terminated: a terminate call's instance is gone.
	terminated
	// interrupted: the provider takes a spot machine back.
	interrupted
	// replicaStarts: a placed replica's copy runs.
	replicaStarts
)

// event is one thing that happens at At; seq orders events of one
// instant as they were scheduled, so that a run is the same every time.
type event struct {
	At      time.Time
	Kind    eventKind
	Machine string
	Replica string
	// Incarnation is the replica's placement the start is for (a start
	// for a placement since undone is dropped).
	Incarnation string
	seq         uint64
}

// agenda is the world's future events, earliest first.
type agenda struct {
	items []event
	seq   uint64
}

func (a *agenda) Len() int { return len(a.items) }
func (a *agenda) Less(i, j int) bool {
	if !a.items[i].At.Equal(a.items[j].At) {
		return a.items[i].At.Before(a.items[j].At)
	}
	return a.items[i].seq < a.items[j].seq
}
func (a *agenda) Swap(i, j int) { a.items[i], a.items[j] = a.items[j], a.items[i] }
func (a *agenda) Push(x any)    { a.items = append(a.items, x.(event)) }
func (a *agenda) Pop() any {
	last := a.items[len(a.items)-1]
	a.items = a.items[:len(a.items)-1]
	return last
}

// add schedules an event.
func (a *agenda) add(e event) {
	a.seq++
	e.seq = a.seq
	heap.Push(a, e)
}

// next is the earliest event's time (false: none).
func (a *agenda) next() (time.Time, bool) {
	if len(a.items) == 0 {
		return time.Time{}, false
	}
	return a.items[0].At, true
}

// due takes the events at or before now, in order.
func (a *agenda) due(now time.Time) []event {
	var out []event
	for len(a.items) > 0 && !a.items[0].At.After(now) {
		out = append(out, heap.Pop(a).(event))
	}
	return out
}
