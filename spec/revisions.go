package spec

import (
	"fmt"

	"github.com/gantry-dev/gantry/api"
)

// RevisionChanges lists what changed in a service's spec from revision
// from to revision to (either may be the older), as Changes does; 0 for
// to means the revision the service runs now.
func RevisionChanges(ro *api.Rollout, from, to int64) ([]string, error) {
	if to == 0 {
		to = currentRevision(ro)
	}
	a, err := revisionOf(ro, from)
	if err != nil {
		return nil, err
	}
	b, err := revisionOf(ro, to)
	if err != nil {
		return nil, err
	}
	return Changes(map[string]any{"spec": a.Spec}, map[string]any{"spec": b.Spec}), nil
}

func revisionOf(ro *api.Rollout, number int64) (*api.Revision, error) {
	for i := range ro.Revisions {
		if ro.Revisions[i].Number == number {
			return &ro.Revisions[i], nil
		}
	}
	numbers := make([]int64, 0, len(ro.Revisions))
	for _, r := range ro.Revisions {
		numbers = append(numbers, r.Number)
	}
	return nil, fmt.Errorf("no revision %d (the service has %v)", number, numbers)
}

// currentRevision is the number of the revision deployed last (0 before
// any).
func currentRevision(ro *api.Rollout) int64 {
	if ro.Deployment == nil {
		return 0
	}
	return ro.Deployment.Number
}
