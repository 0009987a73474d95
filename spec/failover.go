package spec

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
)

// Failover group defaults.
const (
	DefaultLeaseSeconds        = 10
	DefaultFenceMarginSeconds  = 5
	DefaultFailoverFailures    = 3
	DefaultFailoverSuccesses   = 2
	DefaultFailoverInterval    = 1
	DefaultPostgresBinDir      = "/usr/lib/postgresql/15/bin"
	DefaultPostgresUser        = "postgres"
	failoverTemplatePathPrefix = "spec.template"
)

// DefaultFailoverGroup fills in a group's defaults.
func DefaultFailoverGroup(g *api.FailoverGroup) {
	g.APIVersion, g.Kind = api.APIVersion, api.KindFailoverGroup
	sp := &g.Spec
	if sp.LeaseSeconds == 0 {
		sp.LeaseSeconds = DefaultLeaseSeconds
	}
	if sp.FenceMarginSeconds == 0 {
		sp.FenceMarginSeconds = DefaultFenceMarginSeconds
	}
	if sp.Mode == "" {
		sp.Mode = api.FailoverAutomatic
	}
	h := &sp.Health
	if h.FailureThreshold == 0 {
		h.FailureThreshold = DefaultFailoverFailures
	}
	if h.SuccessThreshold == 0 {
		h.SuccessThreshold = DefaultFailoverSuccesses
	}
	if h.IntervalSeconds == 0 {
		h.IntervalSeconds = DefaultFailoverInterval
	}
	for i := range sp.Template.Expose {
		e := &sp.Template.Expose[i]
		if e.Protocol == "" {
			e.Protocol = api.ExposeTCP // a database's clients hold connections
		}
		if e.TargetPort == "" && len(sp.Template.Ports) > 0 {
			e.TargetPort = sp.Template.Ports[0].Name
		}
	}
	if c := &sp.Capability; c.Name == api.CapabilityPostgres {
		if c.Postgres == nil {
			c.Postgres = &api.PostgresCapability{}
		}
		if c.Postgres.BinDir == "" {
			c.Postgres.BinDir = DefaultPostgresBinDir
		}
		if c.Postgres.User == "" {
			c.Postgres.User = DefaultPostgresUser
		}
	}
}

// ValidateFailoverGroup checks a group alone, its template as the
// service each side runs.
func ValidateFailoverGroup(g *api.FailoverGroup) ErrorList {
	errs := validateName(g.Metadata.Name)
	errs = append(errs, validateLabels("metadata.labels", g.Metadata.Labels)...)
	sp := g.Spec
	if len(g.Metadata.Name)+1+max(len(sp.Primary.Cluster), len(sp.Replica.Cluster)) > 63 {
		errs.add("metadata.name", "with a side's cluster name it makes a service name over 63 characters (%s-<cluster>)", g.Metadata.Name)
	}
	switch {
	case sp.Primary.Cluster == "":
		errs.add("spec.primary.cluster", "required")
	case sp.Replica.Cluster == "":
		errs.add("spec.replica.cluster", "required")
	case sp.Primary.Cluster == sp.Replica.Cluster:
		errs.add("spec.replica.cluster", "must differ from spec.primary.cluster (%q): the sides fail independently", sp.Primary.Cluster)
	}
	if sp.Template.Cluster != "" {
		errs.add("spec.template.cluster", "set by the group: each side runs in its own cluster")
	}
	if sp.Template.Replicas != nil && *sp.Template.Replicas != 1 {
		errs.add("spec.template.replicas", "each side runs exactly one replica")
	}
	if sp.Template.Failover != nil {
		errs.add("spec.template.failover", "set by the server")
	}
	if sp.Mode != api.FailoverAutomatic && sp.Mode != api.FailoverManual {
		errs.add("spec.mode", "must be automatic or manual, got %q", sp.Mode)
	}
	if sp.LeaseSeconds < 1 {
		errs.add("spec.leaseSeconds", "must be at least 1")
	}
	if sp.FenceMarginSeconds < 0 {
		errs.add("spec.fenceMarginSeconds", "must be 0 or more")
	}
	if h := sp.Health; h.FailureThreshold < 1 || h.SuccessThreshold < 1 || h.IntervalSeconds < 1 {
		errs.add("spec.health", "failureThreshold, successThreshold and intervalSeconds must be at least 1")
	}
	errs = append(errs, validateCapability(sp)...)
	ports := map[string]bool{}
	for _, p := range sp.Template.Ports {
		ports[p.Name] = true
	}
	for _, e := range validateExpose(sp.Template.Expose, ports) {
		errs = append(errs, &FieldError{Path: failoverTemplatePathPrefix + strings.TrimPrefix(e.Path, "spec"), Message: e.Message})
	}
	// Both sides run the template: the first side's service says it all.
	for _, e := range ValidateService(FailoverMembers(g)[0]) {
		if strings.HasPrefix(e.Path, "spec.cluster") || e.Path == "metadata.name" {
			continue // checked above, in the group's own terms
		}
		errs = append(errs, &FieldError{Path: failoverTemplatePathPrefix + strings.TrimPrefix(e.Path, "spec"), Message: e.Message})
	}
	return errs
}

func validateCapability(sp api.FailoverGroupSpec) ErrorList {
	var errs ErrorList
	c := sp.Capability
	switch c.Name {
	case api.CapabilityPostgres:
		if c.Generic != nil {
			errs.add("spec.capability.generic", "only with name generic")
		}

		if c.Postgres == nil {
			break
		}
		if env := c.Postgres.PasswordEnv; env != "" && !hasKey(sp.Template.SecretEnv, env) && !hasKey(sp.Template.Env, env) {
			errs.add("spec.capability.postgres.passwordEnv", "%q is not an env entry of spec.template", env)
		}
		switch lag := c.Postgres.MaximumLagBytes; {
		case lag < 0:
			errs.add("spec.capability.postgres.maximumLagBytes", "%d: must not be negative (0: the default, %d)", lag, api.DefaultMaximumLagBytes)
		case lag > 0 && c.Postgres.Synchronous:
			errs.add("spec.capability.postgres.maximumLagBytes", "only without synchronous: a synchronous group promotes only its synchronous standby")
		}
	case api.CapabilityGeneric:
		if c.Postgres != nil {
			errs.add("spec.capability.postgres", "only with name postgres")
		}
		if c.Generic == nil || len(c.Generic.Promote) == 0 {
			errs.add("spec.capability.generic.promote", "required: the command that makes a replica primary")
		}
		if len(sp.Template.Command) == 0 {
			errs.add("spec.template.command", "required: the command the generic capability runs")
		}
	case "":
		errs.add("spec.capability.name", "required (postgres or generic)")
	default:
		errs.add("spec.capability.name", "unknown capability %q (want postgres or generic)", c.Name)
	}
	if len(sp.Template.Ports) == 0 {
		errs.add("spec.template.ports", "required: the first port is where the primary is reached")
	}
	if c.Name == api.CapabilityPostgres && len(sp.Template.Command) > 0 {
		errs.add("spec.template.command", "the postgres capability runs PostgreSQL itself: leave command empty")
	}
	if sp.Template.Image != "" {
		errs.add("spec.template.image", "failover members run on the process runtime (images are not supported yet)")
	}
	return errs
}

// FailoverMemberName is the service a group runs in a cluster.
func FailoverMemberName(group, cluster string) string { return group + "-" + cluster }

// FailoverMembers are the two services a group expands into: its
// template in the primary cluster and in the replica cluster, one
// replica each, replaced in place (two copies of one side must never
// run at once), healthy by the group's thresholds.
func FailoverMembers(g *api.FailoverGroup) []*api.Service {
	sides := []struct{ cluster, home string }{{g.Spec.Primary.Cluster, failover.HomePrimary}, {g.Spec.Replica.Cluster, failover.HomeReplica}}
	out := make([]*api.Service, 0, len(sides))
	for _, side := range sides {
		sp := g.Spec.Template
		replicas := 1
		sp.Cluster, sp.Replicas = side.cluster, &replicas
		sp.Expose = nil // the group's name is exposed: its primary only
		sp.Failover = &api.FailoverMemberSpec{Group: g.Metadata.Name, Home: side.home}
		// The member is `gantry member` (resolved to the agent's own
		// binary), which runs the software in the role it is told.
		sp.Command = append([]string{"gantry", "member", "--"}, g.Spec.Template.Command...)
		zero, one := 0, 1
		sp.Update.MaxSurge, sp.Update.MaxUnavailable = &zero, &one
		// The group's name is its drain: a member's old copy stops at once.
		sp.Update.DrainSeconds = &zero
		if sp.HealthCheck == nil && len(sp.Ports) > 0 {
			sp.HealthCheck = &api.HealthCheck{TCP: &api.TCPCheck{Port: sp.Ports[0].Name}}
		}
		if h := sp.HealthCheck; h != nil {
			c := *h
			c.FailureThreshold, c.SuccessThreshold, c.IntervalSeconds = g.Spec.Health.FailureThreshold, g.Spec.Health.SuccessThreshold, g.Spec.Health.IntervalSeconds
			sp.HealthCheck = &c
		}
		labels := map[string]string{"gantry.dev/failover-group": g.Metadata.Name, "gantry.dev/failover-home": side.home}
		for k, v := range g.Metadata.Labels {
			labels[k] = v
		}
		svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: FailoverMemberName(g.Metadata.Name, side.cluster), Labels: labels}, Spec: sp}
		DefaultService(svc)
		out = append(out, svc)
	}
	return out
}

// failoverAcrossDocuments checks each group against the other documents:
// its member services' names are not taken by a service of the file, and
// each side fits its cluster when the file declares it.
func failoverAcrossDocuments(file string, docs []Document, first map[string]int, clusters map[string]*api.Cluster) ErrorList {
	var errs ErrorList
	for _, d := range docs {
		g := d.FailoverGroup
		if g == nil {
			continue
		}
		for i, m := range FailoverMembers(g) {
			side := []string{"spec.primary", "spec.replica"}[i]
			if prev, taken := first[api.KindService+"/"+m.Metadata.Name]; taken {
				errs = append(errs, &FieldError{File: file, Document: d.Index, Path: "metadata.name",
					Message: fmt.Sprintf("the group's service %q is taken by document %d", m.Metadata.Name, prev)})
			}
			c, ok := clusters[m.Spec.Cluster]
			if !ok {
				continue
			}
			if c.Kubernetes() {
				errs = append(errs, &FieldError{File: file, Document: d.Index, Path: side + ".cluster",
					Message: fmt.Sprintf("cluster %q is a Kubernetes cluster: failover groups run on machine clusters for now", c.Metadata.Name)})
			}
		}
	}
	return errs
}
