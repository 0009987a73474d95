package spec

import "github.com/gantry-dev/gantry/api"

// Defaults written into stored specs, so that a later change of a default
// is visible as a change rather than silently applied.
const (
	DefaultContainerCIDR   = "10.244.0.0/16"
	DefaultProvider        = "local"
	DefaultHealthInterval  = 5
	DefaultHealthTimeout   = 2
	DefaultHealthThreshold = 3
	DefaultStopTimeout     = 10
)

// Default fills in every defaulted field of a document in place.
func Default(d *Document) {
	if d.Cluster != nil {
		DefaultCluster(d.Cluster)
	}
	if d.Service != nil {
		DefaultService(d.Service)
	}
	if d.Secret != nil {
		d.Secret.APIVersion, d.Secret.Kind = api.APIVersion, api.KindSecret
	}
	if d.FailoverGroup != nil {
		DefaultFailoverGroup(d.FailoverGroup)
	}
}

// DefaultCluster fills in a cluster's defaults.
func DefaultCluster(c *api.Cluster) {
	c.APIVersion = api.APIVersion
	if c.Spec.Provider.Name == "" {
		c.Spec.Provider.Name = DefaultProvider
	}
	if c.Spec.ContainerCIDR == "" && !c.Kubernetes() {
		c.Spec.ContainerCIDR = DefaultContainerCIDR
	}
	for i := range c.Spec.CapacityGroups {
		g := &c.Spec.CapacityGroups[i]
		if g.CapacityType == "" {
			g.CapacityType = api.CapacityOnDemand
		}
		if g.WarmPoolState == "" {
			g.WarmPoolState = api.WarmRunning
		}
	}
	if c.Spec.Rollout.MaxSurge == 0 {
		c.Spec.Rollout.MaxSurge = 1
	}
}

// DefaultService fills in a service's defaults.
func DefaultService(s *api.Service) {
	s.APIVersion = api.APIVersion
	sp := &s.Spec
	if sp.Replicas == nil {
		one := 1
		sp.Replicas = &one
	}
	if sp.Isolation == "" {
		sp.Isolation = api.IsolationAny
	}
	defaultUpdate(&sp.Update)
	if sp.StopTimeoutSeconds == 0 {
		sp.StopTimeoutSeconds = DefaultStopTimeout
	}
	for i := range sp.Ports {
		if sp.Ports[i].Protocol == "" {
			sp.Ports[i].Protocol = "tcp"
		}
	}
	for i := range sp.Expose {
		e := &sp.Expose[i]
		if e.Protocol == "" {
			e.Protocol = api.ExposeHTTP
		}
		if e.TargetPort == "" && len(sp.Ports) > 0 {
			e.TargetPort = sp.Ports[0].Name
		}
	}
	for _, terms := range [][]api.AffinityTerm{sp.Placement.Affinity, sp.Placement.AntiAffinity} {
		for i := range terms {
			if terms[i].Mode == "" {
				terms[i].Mode = api.AffinityRequired
			}
		}
	}
	if g := sp.Resources.GPU; g != nil && g.Policy == "" {
		g.Policy = api.GPURequired
	}
	if h := sp.HealthCheck; h != nil {
		if h.IntervalSeconds == 0 {
			h.IntervalSeconds = DefaultHealthInterval
		}
		if h.TimeoutSeconds == 0 {
			h.TimeoutSeconds = DefaultHealthTimeout
		}
		if h.FailureThreshold == 0 {
			h.FailureThreshold = DefaultHealthThreshold
		}
		if h.HTTP != nil && h.HTTP.Path == "" {
			h.HTTP.Path = "/"
		}
	}
}
