package decide

import (
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/chunks"
)

// runningReplica is the pass's replica of that id, retiring or not (nil:
// none).
func (p *Pass) runningReplica(id string) *api.Replica {
	if r := p.replica(id); r != nil {
		return r
	}
	if len(p.retiring) == 0 {
		return nil
	}
	return searchByID(chunks.List[api.Replica]{p.retiring}, id)
}

// snapshotReplicasOf are the snapshot's replicas of a service, retiring
// ones too (the snapshot in the store's order).
func (p *Pass) snapshotReplicasOf(service string) (of []*api.Replica) {
	from := chunks.From(p.snap.AllReplicas(), service, func(r *api.Replica, s string) int { return strings.Compare(r.Service, s) })
	for r := range from.All {
		if r.Service != service {
			break
		}
		of = append(of, r)
	}
	return of
}

// searchByID finds a replica by id in a list by service and id, whose
// ids begin with their service's name and a dash (replica.ID).
func searchByID(list chunks.List[api.Replica], id string) *api.Replica {
	for n := strings.LastIndexByte(id, '-'); n >= 0; n = strings.LastIndexByte(id[:n], '-') { // as replicaIndex.find
		if r, ok := chunks.Search(list, [2]string{id[:n], id}, againstServiceAndID); ok {
			return r
		}
	}
	return nil
}
