package cli

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
	"github.com/gantry-dev/gantry/spec"
	"github.com/spf13/cobra"
)

// kindNames are the kinds get reads, and kindAliases every name each
// goes by (singular, plural, short).
var (
	kindNames   = []string{"clusters", "services", "machines", "replicas", "events", "secrets", "failovergroups", "endpoints"}
	kindAliases = map[string][]string{
		"clusters": {"cluster", "cl"}, "services": {"service", "svc"}, "machines": {"machine", "ma", "m"},
		"replicas": {"replica", "rep", "r"}, "events": {"event", "ev"}, "secrets": {"secret", "sec"},
		"failovergroups": {"failovergroup", "fg"}, "endpoints": {"endpoint", "ep"},
	}
)

// canonicalKind is the plural of a kind given by any of its names.
func canonicalKind(s string) (string, error) {
	lower := strings.ToLower(s)
	var every []string
	for _, kind := range kindNames {
		if lower == kind || slices.Contains(kindAliases[kind], lower) {
			return kind, nil
		}
		every = append(every, kind)
		every = append(every, kindAliases[kind]...)
	}
	hint := ""
	if near := spec.Nearest(lower, every); near != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", near)
	}
	return "", fmt.Errorf("unknown resource type %q%s (want %s; short names: %s)", s, hint, strings.Join(kindNames, ", "), shortNames())
}

// shortNames lists each kind's short alias, for help and errors.
func shortNames() string {
	var out []string
	for _, kind := range kindNames {
		aliases := kindAliases[kind]
		out = append(out, aliases[len(aliases)-1]+"="+kind)
	}
	return strings.Join(out, ", ")
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
	t := &table{header: []string{"NAME", "CLUSTER", "READY", "REVISION", "DEPLOYMENT", "RUNS", "AGE"}, wide: []string{"CPU", "MEMORY", "GENERATION"}}
	for _, s := range list {
		ready, revision, deployment := "-", "-", "-"
		if st := s.Status; st != nil {
			ready = fmt.Sprintf("%d/%d", st.Running, st.Desired)
			if st.Revision > 0 {
				revision, deployment = fmt.Sprint(st.Revision), st.Deployment
			}
		}
		runs := s.Spec.Image
		if runs == "" {
			runs = strings.Join(s.Spec.Command, " ")
		}
		t.add(s.Metadata.Name, s.Spec.Cluster, ready, revision, deployment, runs, age(timePtr(s.Metadata.CreatedAt)),
			cpuOf(s.Spec.Resources.CPU), bytesOf(s.Spec.Resources.Memory), fmt.Sprint(s.Metadata.Generation))
	}
	return t
}

// cpuOf and bytesOf print a spec's quantity the way machine columns do
// (500m, 2; 512Mi, 2Gi).
func cpuOf(q string) string {
	if milli, err := api.ParseCPU(q); err == nil && q != "" {
		return api.FormatCPU(milli)
	}
	return orDash(q)
}

func bytesOf(q string) string {
	if b, err := api.ParseBytes(q); err == nil && q != "" {
		return api.FormatBytes(b)
	}
	return orDash(q)
}

func machineTable(list []api.Machine) *table {
	t := &table{header: []string{"NAME", "CLUSTER", "GROUP", "TYPE", "JOIN", "FLEET", "CPU", "MEMORY", "AGE"},
		wide: []string{"PROVIDER-ID", "ZONE", "SUBNET", "ADDRESS", "HEARTBEAT", "REASON"}}
	for _, m := range list {
		fleet := string(m.FleetState)
		if m.Cordoned {
			fleet += ",cordoned" // as kubectl's Ready,SchedulingDisabled
		}
		t.add(m.ID, m.Cluster, m.Group, m.InstanceType, string(m.JoinState), fleet,
			fmt.Sprintf("%s/%s", api.FormatCPU(m.Allocated.MilliCPU), api.FormatCPU(m.Allocatable.MilliCPU)),
			fmt.Sprintf("%s/%s", api.FormatBytes(m.Allocated.MemoryBytes), api.FormatBytes(m.Allocatable.MemoryBytes)),
			age(m.CreatedAt), orDash(m.ProviderID), orDash(m.Zone), orDash(m.Subnet), orDash(strings.Join(m.Addresses, ",")),
			age(timePtr(m.LastHeartbeat)), orDash(m.Reason))
	}
	return t
}

// replicaTable lists replicas; MACHINE is the node of a Pod's replica (a
// Kubernetes cluster's).
func replicaTable(list []api.Replica) *table {
	t := &table{header: []string{"NAME", "SERVICE", "MACHINE", "STATE", "HEALTH", "RESTARTS", "URL", "REASON"}, wide: []string{"SPEC", "CPU", "MEMORY"}}
	for _, r := range list {
		state, reason := string(r.State), r.Reason
		if r.RetiringSince != nil {
			state, reason = "retiring", r.RetireReason
		}
		t.add(r.ID, r.Service, orDash(cmp.Or(r.Machine, r.Node)), state, orDash(string(r.Health)), fmt.Sprint(r.Restarts), orDash(r.URL()),
			orDash(reason), r.SpecHash, api.FormatCPU(r.Requests.MilliCPU), api.FormatBytes(r.Requests.MemoryBytes))
	}
	return t
}

// endpointsTable: a service's name, how many of its replicas it answers,
// and where; wide adds each replica left out, with why.
func endpointsTable(list []api.ServiceEndpoints) *table {
	t := &table{header: []string{"SERVICE", "NAME", "SERVING", "ENDPOINTS"}, wide: []string{"NOT SERVING"}}
	for _, s := range list {
		var in, out []string
		for _, e := range s.Endpoints {
			switch {
			case e.Serving && e.Weight != endpoints.DefaultWeight:
				in = append(in, fmt.Sprintf("%s (weight %d)", endpointAddress(e), e.Weight))
			case e.Serving:
				in = append(in, endpointAddress(e))
			default:
				out = append(out, e.Replica+": "+e.Reason)
			}
		}
		t.add(s.Service, s.Name, fmt.Sprintf("%d/%d", len(in), len(s.Endpoints)), orDash(strings.Join(in, ",")), orDash(strings.Join(out, "; ")))
	}
	return t
}

// endpointAddress is address:port of an endpoint's first port by name.
func endpointAddress(e api.Endpoint) string {
	names := make([]string, 0, len(e.Ports))
	for name := range e.Ports {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return e.Address
	}
	return fmt.Sprintf("%s:%d", e.Address, e.Ports[names[0]])
}

func eventTable(list []api.Event) *table {
	t := &table{header: []string{"AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"}}
	for _, e := range list {
		t.add(age(e.Time), e.Type, e.Reason, strings.ToLower(e.ObjectKind)+"/"+e.ObjectName, e.Message)
	}
	return t
}

func newDeleteCmd(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:               "delete (cluster|service|secret|failovergroup|replica) NAME | delete KIND/NAME | delete -f FILE|DIR",
		Short:             "Delete a cluster (once it has no services), a service, a Secret nothing uses, or one replica (its service makes it again); or the resources of spec files",
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: completeKindThenName(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) > 0 {
				if len(args) > 0 {
					return fmt.Errorf("either -f FILE or KIND NAME, not both")
				}
				return deleteFiles(cmd, g, files)
			}
			if len(args) == 0 {
				return fmt.Errorf("want KIND NAME, KIND/NAME or -f FILE")
			}
			kind, name, err := kindAndName(args, "clusters", "services", "secrets", "failovergroups", "replicas", "machines")
			if err != nil {
				return err
			}
			args = []string{kind, name}
			c, err := g.client()
			if err != nil {
				return err
			}
			switch kind {
			case "replicas":
				err = c.DeleteReplica(cmd.Context(), args[1])
			case "machines":
				return fmt.Errorf("machines are removed by draining them: gantry drain %s", args[1])
			case "clusters":
				err = c.DeleteCluster(cmd.Context(), args[1])
			case "services":
				err = c.DeleteService(cmd.Context(), args[1])
			case "secrets":
				err = c.DeleteSecret(cmd.Context(), args[1])
			case "failovergroups":
				err = c.DeleteFailoverGroup(cmd.Context(), args[1])
			default:
				return fmt.Errorf("%s are observed, not declared: they cannot be deleted (delete their service or cluster)", kind)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "%s/%s deleted\n", singular(kind), args[1])
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "spec file or directory of them whose resources to delete; repeatable")
	return cmd
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
