package cli

import (
	"context"
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// streams says whether the list is printed chunk by chunk as it arrives:
// machines and replicas read in chunks, printed as rows (a table or
// names) in the server's order, as kubectl prints a long list. A sort,
// JSON or YAML (one document) and jsonpath need the whole list first.
func (q *getQuery) streams() bool {
	format := q.opts.output
	rows := format == formatTable || format == formatWide || format == formatName
	return rows && q.name == "" && q.opts.sortBy == "" && q.opts.chunkSize > 0 && (q.kind == "machines" || q.kind == "replicas")
}

// stream prints the list a chunk at a time. Each chunk is sorted by name
// (in natural order) and its table aligned on its own; the chunks come
// in the server's order (by service, then id, for replicas), so a list
// that fits in one chunk prints as a whole list would.
func (q *getQuery) stream(ctx context.Context) error {
	serviceLabels, err := q.serviceLabels(ctx)
	if err != nil {
		return err
	}
	printed := 0
	printChunk := func(objs []any) error {
		items, err := q.items(objs, serviceLabels)
		if err != nil || len(items) == 0 {
			return err
		}
		err = q.print(items, printed == 0)
		printed += len(items)
		return err
	}
	switch q.kind {
	case "machines":
		err = q.c.EachMachineChunk(ctx, "", q.opts.chunkSize, func(ms []api.Machine) error { return printChunk(anySlice(ms)) })
	default:
		err = q.c.EachReplicaChunk(ctx, client.ReplicaQuery{}, q.opts.chunkSize, func(rs []api.Replica) error { return printChunk(anySlice(rs)) })
	}
	if err != nil {
		return err
	}
	if printed == 0 {
		fmt.Fprintf(q.g.errOut, "No %s found.\n", q.kind)
	}
	return nil
}
