package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/spf13/cobra"
)

// kinds maps every accepted spelling to the canonical resource name.
func canonicalKind(s string) (string, error) {
	switch strings.ToLower(s) {
	case "cluster", "clusters", "cl":
		return "clusters", nil
	case "service", "services", "svc":
		return "services", nil
	case "machine", "machines", "m":
		return "machines", nil
	case "replica", "replicas", "r":
		return "replicas", nil
	case "event", "events", "ev":
		return "events", nil
	case "secret", "secrets":
		return "secrets", nil
	}
	return "", fmt.Errorf("unknown resource type %q (want clusters, services, machines, replicas, events or secrets)", s)
}

func newGetCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get (clusters|services|machines|replicas|events|secrets) [NAME]",
		Short: "List resources, or show one",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			kind, err := canonicalKind(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			return getAndPrint(cmd.Context(), g, c, kind, name, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, wide, json or yaml")
	return cmd
}

func getAndPrint(ctx context.Context, g *globals, c *client.Client, kind, name, output string) error {
	items, t, err := fetch(ctx, c, kind, name)
	if err != nil {
		return err
	}
	switch output {
	case formatJSON, formatYAML:
		if name != "" && len(items) == 1 {
			return printStructured(g.out, output, items[0])
		}
		return printStructured(g.out, output, map[string]any{"items": items})
	}
	if len(t.rows) == 0 {
		fmt.Fprintf(g.out, "No %s found.\n", kind)
		return nil
	}
	return t.print(g.out, output == formatWide)
}

// fetch reads one kind (or one object of it) and renders its table.
func fetch(ctx context.Context, c *client.Client, kind, name string) ([]any, *table, error) {
	switch kind {
	case "clusters":
		list, err := listOrOne(ctx, name, c.ListClusters, c.GetCluster)
		return anySlice(list), clusterTable(list), err
	case "services":
		list, err := listOrOne(ctx, name, c.ListServices, c.GetService)
		return anySlice(list), serviceTable(list), err
	case "machines":
		list, err := listOrOne(ctx, name, func(ctx context.Context) ([]api.Machine, error) { return c.ListMachines(ctx, "") }, c.GetMachine)
		return anySlice(list), machineTable(list), err
	case "replicas":
		list, err := listOrOne(ctx, name, func(ctx context.Context) ([]api.Replica, error) { return c.ListReplicas(ctx, "") }, c.GetReplica)
		return anySlice(list), replicaTable(list), err
	case "secrets":
		list, err := listOrOne(ctx, name, c.ListSecrets, c.GetSecret)
		return anySlice(list), secretTable(list), err
	default:
		q := client.EventQuery{Limit: 200}
		if name != "" {
			q.Name = name
		}
		list, err := c.ListEvents(ctx, q)
		return anySlice(list), eventTable(list), err
	}
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

func clusterTable(list []api.Cluster) *table {
	t := &table{header: []string{"NAME", "PROVIDER", "GROUPS", "MACHINES", "UPDATED", "AGE"}, wide: []string{"CIDR", "GENERATION", "CONDITIONS"}}
	for _, c := range list {
		var groups, conditions []string
		joined, desired, updated, current := 0, 0, 0, 0
		if c.Status != nil {
			for _, gs := range c.Status.Groups {
				groups = append(groups, fmt.Sprintf("%s %d/%d", gs.GroupID, gs.Joined, gs.Desired))
				joined += gs.Joined
				desired += gs.Desired
				updated += gs.Updated
				current += gs.Current
			}
			for _, cond := range c.Status.Conditions {
				conditions = append(conditions, cond.Type+"="+cond.Status)
			}
		}
		rollout := fmt.Sprintf("%d/%d", updated, current)
		if updated < current {
			rollout += " (rolling)"
		}
		t.add(c.Metadata.Name, c.Spec.Provider.Name, strings.Join(groups, ","), fmt.Sprintf("%d/%d", joined, desired), rollout,
			age(timePtr(c.Metadata.CreatedAt)), c.Spec.ContainerCIDR, fmt.Sprint(c.Metadata.Generation), orDash(strings.Join(conditions, ",")))
	}
	return t
}

func serviceTable(list []api.Service) *table {
	t := &table{header: []string{"NAME", "CLUSTER", "READY", "RUNS", "AGE"}, wide: []string{"CPU", "MEMORY", "GENERATION"}}
	for _, s := range list {
		ready := "-"
		if s.Status != nil {
			ready = fmt.Sprintf("%d/%d", s.Status.Running, s.Status.Desired)
		}
		runs := s.Spec.Image
		if runs == "" {
			runs = strings.Join(s.Spec.Command, " ")
		}
		t.add(s.Metadata.Name, s.Spec.Cluster, ready, runs, age(timePtr(s.Metadata.CreatedAt)),
			orDash(s.Spec.Resources.CPU), orDash(s.Spec.Resources.Memory), fmt.Sprint(s.Metadata.Generation))
	}
	return t
}

func machineTable(list []api.Machine) *table {
	t := &table{header: []string{"NAME", "CLUSTER", "GROUP", "TYPE", "JOIN", "FLEET", "CPU", "MEMORY", "AGE"},
		wide: []string{"PROVIDER-ID", "ZONE", "SUBNET", "ADDRESS", "HEARTBEAT", "REASON"}}
	for _, m := range list {
		t.add(m.ID, m.Cluster, m.Group, m.InstanceType, string(m.JoinState), string(m.FleetState),
			fmt.Sprintf("%s/%s", api.FormatCPU(m.Allocated.MilliCPU), api.FormatCPU(m.Allocatable.MilliCPU)),
			fmt.Sprintf("%s/%s", api.FormatBytes(m.Allocated.MemoryBytes), api.FormatBytes(m.Allocatable.MemoryBytes)),
			age(m.CreatedAt), orDash(m.ProviderID), orDash(m.Zone), orDash(m.Subnet), orDash(strings.Join(m.Addresses, ",")),
			age(timePtr(m.LastHeartbeat)), orDash(m.Reason))
	}
	return t
}

// ReplicaURL is where a replica's first port answers, if it has one.
func ReplicaURL(r api.Replica) string {
	if r.Address == "" || len(r.HostPorts) == 0 {
		return ""
	}
	port, ok := r.HostPorts["http"]
	if !ok {
		names := make([]string, 0, len(r.HostPorts))
		for n := range r.HostPorts {
			names = append(names, n)
		}
		sort.Strings(names)
		port = r.HostPorts[names[0]]
	}
	return fmt.Sprintf("http://%s:%d", r.Address, port)
}

func replicaTable(list []api.Replica) *table {
	t := &table{header: []string{"NAME", "SERVICE", "MACHINE", "STATE", "HEALTH", "RESTARTS", "URL"}, wide: []string{"SPEC", "REASON"}}
	for _, r := range list {
		t.add(r.ID, r.Service, orDash(r.Machine), string(r.State), orDash(string(r.Health)), fmt.Sprint(r.Restarts), orDash(ReplicaURL(r)), r.SpecHash, orDash(r.Reason))
	}
	return t
}

func eventTable(list []api.Event) *table {
	t := &table{header: []string{"AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"}}
	for _, e := range list {
		t.add(age(e.Time), e.Type, e.Reason, strings.ToLower(e.ObjectKind)+"/"+e.ObjectName, e.Message)
	}
	return t
}

func newDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete (cluster|service|secret) NAME",
		Short: "Delete a cluster (once it has no services), a service, or a Secret nothing uses",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := canonicalKind(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			switch kind {
			case "clusters":
				err = c.DeleteCluster(cmd.Context(), args[1])
			case "services":
				err = c.DeleteService(cmd.Context(), args[1])
			case "secrets":
				err = c.DeleteSecret(cmd.Context(), args[1])
			default:
				return fmt.Errorf("%s are observed, not declared: they cannot be deleted (delete their service or cluster)", kind)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "%s/%s deleted\n", strings.TrimSuffix(kind, "s"), args[1])
			return nil
		},
	}
}

func secretTable(list []api.Secret) *table {
	t := &table{header: []string{"NAME", "KEYS", "REVISION", "AGE"}}
	for _, s := range list {
		var keys []string
		revision := ""
		if s.Status != nil {
			keys, revision = s.Status.Keys, s.Status.Revision
		}
		t.add(s.Metadata.Name, strings.Join(keys, ","), revision, age(timePtr(s.Metadata.CreatedAt)))
	}
	return t
}
