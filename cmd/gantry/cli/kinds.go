package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
)

// fetchObjects reads one kind (or one object of it); events after an id;
// machines and replicas chunk at a time (0: in one request).
func fetchObjects(ctx context.Context, c *client.Client, kind, name string, afterEvent int64, chunk int) ([]any, error) {
	switch kind {
	case "clusters":
		list, err := listOrOne(ctx, name, c.ListClusters, c.GetCluster)
		return anySlice(list), err
	case "services":
		list, err := listOrOne(ctx, name, c.ListServices, c.GetService)
		return anySlice(list), err
	case "machines":
		list, err := listOrOne(ctx, name, func(ctx context.Context) ([]api.Machine, error) { return c.ListMachinesInChunks(ctx, "", chunk) }, c.GetMachine)
		return anySlice(list), err
	case "replicas":
		list, err := listOrOne(ctx, name, func(ctx context.Context) ([]api.Replica, error) {
			return c.ListReplicasInChunks(ctx, client.ReplicaQuery{}, chunk)
		}, c.GetReplica)
		return anySlice(list), err
	case "secrets":
		list, err := listOrOne(ctx, name, c.ListSecrets, c.GetSecret)
		return anySlice(list), err
	case "failovergroups":
		list, err := listOrOne(ctx, name, c.ListFailoverGroups, c.GetFailoverGroup)
		return anySlice(list), err
	case "endpoints":
		list, err := listOrOne(ctx, name, func(ctx context.Context) ([]api.ServiceEndpoints, error) { return allEndpoints(ctx, c) }, c.ServiceEndpoints)
		return anySlice(list), err
	}
	q := client.EventQuery{Limit: 200, Name: name, AfterID: afterEvent}
	list, err := c.ListEvents(ctx, q)
	return anySlice(list), err
}

// allEndpoints are every service's endpoints.
func allEndpoints(ctx context.Context, c *client.Client) ([]api.ServiceEndpoints, error) {
	services, err := c.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.ServiceEndpoints, 0, len(services))
	for _, s := range services {
		set, err := c.ServiceEndpoints(ctx, s.Metadata.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, *set)
	}
	return out, nil
}

func listOrOne[T any](ctx context.Context, name string, list func(context.Context) ([]T, error), get func(context.Context, string) (*T, error)) ([]T, error) {
	if name == "" {
		return list(ctx)
	}
	one, err := get(ctx, name)
	if err != nil {
		return nil, err
	}
	return []T{*one}, nil
}

func anySlice[T any](in []T) []any {
	out := make([]any, len(in))
	for i := range in {
		out[i] = in[i]
	}
	return out
}

// objectName is what `-o name` and completion print of an object.
func objectName(obj any) string {
	switch o := obj.(type) {
	case api.Cluster:
		return o.Metadata.Name
	case api.Service:
		return o.Metadata.Name
	case api.Secret:
		return o.Metadata.Name
	case api.FailoverGroup:
		return o.Metadata.Name
	case api.Machine:
		return o.ID
	case api.Replica:
		return o.ID
	case api.Event:
		return fmt.Sprint(o.ID)
	case api.ServiceEndpoints:
		return o.Service
	}
	return ""
}

// labelsOf are the labels a selector matches: a resource's own, a
// machine's (its group's), a replica's own (its service's are added by
// the caller).
func labelsOf(obj any) map[string]string {
	switch o := obj.(type) {
	case api.Cluster:
		return o.Metadata.Labels
	case api.Service:
		return o.Metadata.Labels
	case api.Secret:
		return o.Metadata.Labels
	case api.FailoverGroup:
		return o.Metadata.Labels
	case api.Machine:
		return o.Labels
	case api.Replica:
		return o.Labels
	}
	return nil
}

func tableOf(kind string, objs []any) *table {
	switch kind {
	case "clusters":
		return clusterTable(typed[api.Cluster](objs))
	case "services":
		return serviceTable(typed[api.Service](objs))
	case "machines":
		return machineTable(typed[api.Machine](objs))
	case "replicas":
		return replicaTable(typed[api.Replica](objs))
	case "secrets":
		return secretTable(typed[api.Secret](objs))
	case "failovergroups":
		return failoverTable(typed[api.FailoverGroup](objs))
	case "endpoints":
		return endpointsTable(typed[api.ServiceEndpoints](objs))
	}
	return eventTable(typed[api.Event](objs))
}

func typed[T any](objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(T))
	}
	return out
}

// completeNames completes the first argument with the names of a kind
// on the server.
func completeNames(g *globals, kind string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return namesOnServer(cmd.Context(), g, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeKindThenName completes a kind, then names of it.
func completeKindThenName(g *globals) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			var out []string
			for _, k := range []string{"clusters", "services", "machines", "replicas", "events", "secrets", "failovergroups", "endpoints"} {
				if strings.HasPrefix(k, toComplete) {
					out = append(out, k)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		case 1:
			kind, err := canonicalKind(args[0])
			if err != nil || kind == "events" {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return namesOnServer(cmd.Context(), g, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

func namesOnServer(ctx context.Context, g *globals, kind, prefix string) []string {
	c, err := g.client()
	if err != nil {
		return nil
	}
	objs, err := fetchObjects(ctx, c, kind, "", 0, defaultChunkSize)
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		if n := objectName(o); strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
