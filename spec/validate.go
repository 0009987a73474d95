package spec

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// Providers is what validation knows of the providers (the provider
// registry): their names, their built-in catalogs for a cluster's
// settings, and whether their machines download the agent binary.
type Providers interface {
	Names() []string
	Catalog(p api.ProviderSpec) ([]provisioner.InstanceType, bool)
	// RequiresAgentBinaries: the provider's machines boot by downloading
	// the gantry binary, so spec.agent.binaries must say from where.
	RequiresAgentBinaries(provider string) bool
	// AcceptsAgentBinaries: the provider's machines may download it; the
	// others run the server's own binary, so binaries would reach nothing.
	AcceptsAgentBinaries(provider string) bool
	// Routes says why a provider's network cannot route each machine's
	// /24 to it (network mode routed) with these settings; nil if it can.
	Routes(p api.ProviderSpec) error
	// Runtimes are what the provider's machines run (process, docker),
	// nil where their agents alone say (machines joined by hand).
	Runtimes(provider string) []string
}

var (
	dnsLabel   = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)
	groupIDRe  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	envNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sha256Re   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	labelKeyRe = regexp.MustCompile(`^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
)

// ValidateDocument checks one defaulted document on its own; nil
// providers skips what depends on them.
func ValidateDocument(d Document, providers Providers) ErrorList {
	switch {
	case d.Cluster != nil:
		return ValidateCluster(d.Cluster, providers)
	case d.Secret != nil:
		return ValidateSecret(d.Secret)
	case d.FailoverGroup != nil:
		return ValidateFailoverGroup(d.FailoverGroup)
	}
	errs := ValidateService(d.Service)
	if d.Service.Spec.Failover != nil {
		errs.add("spec.failover", "set by the server for the services of a FailoverGroup")
	}
	return errs
}

func envBytes(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += len(k) + len(v)
	}
	return n
}

func validateName(name string) ErrorList {
	var errs ErrorList
	switch {
	case name == "":
		errs.add("metadata.name", "required")
	case len(name) > 63 || !dnsLabel.MatchString(name):
		errs.add("metadata.name", "%q is not a valid name (lowercase letters, digits and hyphens, starting with a letter, at most 63 characters)", name)
	}
	return errs
}

func validateLabels(path string, labels map[string]string) ErrorList {
	var errs ErrorList
	for _, k := range sortedStringKeys(labels) {
		if len(k) > 253 || !labelKeyRe.MatchString(k) {
			errs.add(childPath(path, k), "invalid label key")
		}
		if len(labels[k]) > 253 {
			errs.add(childPath(path, k), "label value longer than 253 characters")
		}
	}
	return errs
}

// ValidateCluster checks a defaulted cluster.
func ValidateCluster(c *api.Cluster, providers Providers) ErrorList {
	errs := validateName(c.Metadata.Name)
	errs = append(errs, validateLabels("metadata.labels", c.Metadata.Labels)...)
	if c.Kubernetes() {
		return append(errs, validateKubernetesCluster(c)...)
	}
	s := c.Spec
	if len(s.CapacityGroups) == 0 {
		errs.add("spec.capacityGroups", "at least one capacity group is required")
	}
	var catalog []provisioner.InstanceType
	haveCatalog := false
	if providers != nil {
		if known := providers.Names(); !slices.Contains(known, s.Provider.Name) {
			errs.add("spec.provider.name", "unknown provider %q (known: %s)", s.Provider.Name, strings.Join(append(known, api.ProviderKubernetes), ", "))
		}
		catalog, haveCatalog = providers.Catalog(s.Provider)
		errs = append(errs, validateAgentBinaries(s, providers)...)
		if haveCatalog {
			errs = append(errs, validateReserved(c, catalog)...)
		}
	}
	seen := map[string]int{}
	totalMax := 0
	for i, g := range s.CapacityGroups {
		path := indexPath("spec.capacityGroups", i)
		if prev, dup := seen[g.GroupID]; dup && g.GroupID != "" {
			errs.add(path+".groupId", "duplicate groupId %q (also %s)", g.GroupID, indexPath("spec.capacityGroups", prev))
		}
		seen[g.GroupID] = i
		errs = append(errs, validateGroup(path, g, catalog, haveCatalog)...)
		totalMax += g.MaxSize
	}
	errs = append(errs, validateCIDR(s.ContainerCIDR, totalMax)...)
	if n := s.Network; n != nil {
		switch n.Mode {
		case "", api.NetworkHost, api.NetworkOverlay:
		case api.NetworkRouted:
			if providers != nil {
				if err := providers.Routes(s.Provider); err != nil {
					errs.add("spec.network.mode", "routed: %v; use overlay (an encrypted mesh) or host", err)
				}
			}
		default:
			errs.add("spec.network.mode", "unknown mode %q (want host, overlay or routed)", n.Mode)
		}
	}
	errs = append(errs, validateTemplate(s)...)
	errs = append(errs, validateAmounts("spec.systemReserved", s.SystemReserved)...)
	return errs
}

func validateTemplate(s api.ClusterSpec) ErrorList {
	var errs ErrorList
	if s.Rollout.MaxSurge < 1 {
		errs.add("spec.rollout.maxSurge", "must be at least 1")
	}
	if a := s.Agent; a != nil {
		for _, arch := range sortedKeysOf(a.Binaries) {
			path, b := "spec.agent.binaries."+arch, a.Binaries[arch]
			if arch != "amd64" && arch != "arm64" {
				errs.add(path, "unknown architecture (want amd64 or arm64)")
			}
			if b.URL == "" {
				errs.add(path+".url", "required")
			}
			errs = append(errs, validateURL(path+".url", b.URL)...)
			if !sha256Re.MatchString(b.SHA256) {
				errs.add(path+".sha256", "want 64 lowercase hex digits")
			}
		}
		errs = append(errs, validateURL("spec.agent.apiUrl", a.APIURL)...)
	}
	if m := s.Monitoring; m != nil {
		errs = append(errs, validateURL("spec.monitoring.otlpLogsEndpoint", m.OTLPLogsEndpoint)...)
		errs = append(errs, validateURL("spec.monitoring.otlpMetricsEndpoint", m.OTLPMetricsEndpoint)...)
		for i, h := range m.Headers {
			path := indexPath("spec.monitoring.headers", i)
			if h.Name == "" {
				errs.add(path+".name", "required")
			}
			errs = append(errs, validateHeaderRef(path+".secretRef", h.SecretRef)...)
		}
	}
	return errs
}

// validateAgentBinaries: binaries where the provider's machines download
// the agent, none where they run the server's own binary (a change would
// roll machines for nothing).
func validateAgentBinaries(s api.ClusterSpec, providers Providers) ErrorList {
	var errs ErrorList
	has := s.Agent != nil && len(s.Agent.Binaries) > 0
	switch name := s.Provider.Name; {
	case !has && providers.RequiresAgentBinaries(name):
		errs.add("spec.agent.binaries", "required for provider %s: where its machines download the gantry binary (amd64, arm64: url and sha256)", name)
	case has && !providers.AcceptsAgentBinaries(name):
		errs.add("spec.agent.binaries", "provider %s runs the server's own gantry binary: binaries would reach no machine", name)
	}
	return errs
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func validateURL(path, raw string) ErrorList {
	var errs ErrorList
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs.add(path, "%q is not an http(s) URL", raw)
	}
	return errs
}

func validateGroup(path string, g api.CapacityGroup, catalog []provisioner.InstanceType, haveCatalog bool) ErrorList {
	var errs ErrorList
	switch {
	case g.GroupID == "":
		errs.add(path+".groupId", "required")
	case len(g.GroupID) > 63 || !groupIDRe.MatchString(g.GroupID):
		errs.add(path+".groupId", "%q is not a valid groupId (lowercase letters, digits and hyphens)", g.GroupID)
	}
	if g.MinSize < 0 {
		errs.add(path+".minSize", "must be 0 or more, got %d", g.MinSize)
	}
	if g.MaxSize < 1 || g.MaxSize > MaxGroupSize {
		errs.add(path+".maxSize", "must be between 1 and %d (the limit of machines per group), got %d", MaxGroupSize, g.MaxSize)
	}
	if g.MinSize > g.MaxSize && g.MaxSize >= 1 {
		errs.add(path+".minSize", "minSize %d is greater than maxSize %d", g.MinSize, g.MaxSize)
	}
	if g.WarmPool < 0 || g.WarmPool > g.MaxSize {
		errs.add(path+".warmPool", "must be between 0 and maxSize (%d), got %d", g.MaxSize, g.WarmPool)
	}
	if g.WarmPoolState != api.WarmRunning && g.WarmPoolState != api.WarmStopped {
		errs.add(path+".warmPoolState", "unknown warm pool state %q (want running or stopped)", g.WarmPoolState)
	}
	switch {
	case g.Role != "" && g.Role != api.RoleEdge:
		errs.add(path+".role", "unknown role %q (want edge, or none)", g.Role)
	case g.Role == api.RoleEdge && g.MinSize < 1:
		errs.add(path+".minSize", "an edge group keeps at least 1 machine: its machines serve the cluster's exposed ports")
	}
	if !contains([]string{api.CapacityOnDemand, api.CapacitySpot, api.CapacityAny}, g.CapacityType) {
		errs.add(path+".capacityType", "unknown capacity type %q (want onDemand, spot or any)", g.CapacityType)
	}
	for j, z := range g.Zones {
		if z == "" {
			errs.add(indexPath(path+".zones", j), "empty zone")
		}
	}
	errs = append(errs, validateLabels(path+".labels", g.Labels)...)
	if g.Profile != nil {
		errs = append(errs, validateProfile(path+".profile", *g.Profile)...)
	}
	if g.InstanceType != "" && haveCatalog {
		if _, ok := provisioner.FindInstanceType(catalog, g.InstanceType); !ok {
			errs.add(path+".instanceType", "unknown instance type %q (known: %s)", g.InstanceType, strings.Join(typeNames(catalog), ", "))
		}
	}
	return errs
}

func validateProfile(path string, p api.MachineProfile) ErrorList {
	var errs ErrorList
	if milli, err := api.ParseCPU(p.CPU); err != nil {
		errs.add(path+".cpu", "%v", err)
	} else if milli == 0 {
		errs.add(path+".cpu", "must be more than 0")
	}
	if p.MemoryBytes <= 0 {
		errs.add(path+".memoryBytes", "must be more than 0")
	}
	if p.EphemeralStorageBytes < 0 {
		errs.add(path+".ephemeralStorageBytes", "must be 0 or more")
	}
	if p.GPU != nil {
		if p.GPU.Count < 1 {
			errs.add(path+".gpu.count", "must be at least 1")
		}
		if p.GPU.Type == "" {
			errs.add(path+".gpu.type", "required")
		}
	}
	return errs
}

func validateCIDR(cidr string, machines int) ErrorList {
	var errs ErrorList
	prefix, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil:
		errs.add("spec.containerCidr", "%q is not a CIDR (want e.g. 10.244.0.0/16)", cidr)
	case !prefix.Addr().Is4():
		errs.add("spec.containerCidr", "%q: only IPv4 ranges are supported", cidr)
	case prefix.Masked() != prefix:
		errs.add("spec.containerCidr", "%q has host bits set (did you mean %s?)", cidr, prefix.Masked())
	case prefix.Bits() > 24:
		errs.add("spec.containerCidr", "%q is too small: every machine gets a /24, so the range must be /24 or larger", cidr)
	default:
		if subnets := 1 << (24 - prefix.Bits()); subnets < machines {
			errs.add("spec.containerCidr", "%q holds %d /24 subnets, fewer than the %d machines the capacity groups allow (sum of maxSize)", cidr, subnets, machines)
		}
	}
	return errs
}

func validateAmounts(path string, r api.ResourceAmounts) ErrorList {
	var errs ErrorList
	if r.CPU != "" {
		if _, err := api.ParseCPU(r.CPU); err != nil {
			errs.add(path+".cpu", "%v", err)
		}
	}
	for _, f := range []struct{ field, value string }{{"memory", r.Memory}, {"ephemeralStorage", r.EphemeralStorage}} {
		field, value := f.field, f.value
		if value == "" {
			continue
		}
		n, err := api.ParseBytes(value)
		switch {
		case err != nil:
			errs.add(path+"."+field, "%v%s", err, byteUnitHint(value))
		case n > 0 && n < 1<<20 && isPlainNumber(value):
			errs.add(path+"."+field, "%s is %d bytes (a number without a unit counts bytes): did you mean %sMi?", value, n, strings.TrimSpace(value))
		}
	}
	return errs
}

// isPlainNumber reports a quantity written without a unit.
func isPlainNumber(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// byteUnitHint suggests the units Gantry reads for the ones people write
// out of habit (512MB, 2gb, 1gi).
func byteUnitHint(s string) string {
	s = strings.TrimSpace(s)
	number := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := strings.ToLower(s[len(number):])
	if number == "" || !isPlainNumber(number) {
		return ""
	}
	for _, u := range []string{"k", "m", "g", "t"} {
		if unit == u+"b" || unit == u+"i" || unit == u+"ib" {
			return fmt.Sprintf(" (did you mean %s%si or %s%s?)", number, strings.ToUpper(u), number, map[string]string{"k": "k", "m": "M", "g": "G", "t": "T"}[u])
		}
	}
	return ""
}

// Reserved parses a validated systemReserved block.
func Reserved(r api.ResourceAmounts) api.Resources {
	var out api.Resources
	out.MilliCPU, _ = parseOptionalCPU(r.CPU)
	out.MemoryBytes, _ = parseOptionalBytes(r.Memory)
	out.EphemeralBytes, _ = parseOptionalBytes(r.EphemeralStorage)
	return out
}

// Requests parses a validated service's per-replica requests.
func Requests(s api.ServiceSpec) api.Resources {
	var out api.Resources
	out.MilliCPU, _ = parseOptionalCPU(s.Resources.CPU)
	out.MemoryBytes, _ = parseOptionalBytes(s.Resources.Memory)
	out.EphemeralBytes, _ = parseOptionalBytes(s.Resources.EphemeralStorage)
	if g := s.Resources.GPU; g != nil && g.Policy == api.GPURequired {
		out.GPUs = g.Count
	}
	return out
}

func parseOptionalCPU(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return api.ParseCPU(s)
}

func parseOptionalBytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return api.ParseBytes(s)
}

// ValidateService checks a defaulted service.
func ValidateService(svc *api.Service) ErrorList {
	errs := validateName(svc.Metadata.Name)
	errs = append(errs, validateLabels("metadata.labels", svc.Metadata.Labels)...)
	s := svc.Spec
	if s.Cluster == "" {
		errs.add("spec.cluster", "required")
	}
	if s.Image == "" && len(s.Command) == 0 {
		errs.add("spec", "one of image or command is required")
	}
	for i, c := range s.Command {
		if c == "" {
			errs.add(indexPath("spec.command", i), "empty")
		}
	}
	if n := s.DesiredReplicas(); n < 0 || n > MaxReplicas {
		errs.add("spec.replicas", "must be between 0 and %d (the limit of replicas per service), got %d", MaxReplicas, n)
	}
	errs = append(errs, validateSecretEnv(s)...)
	if n := envBytes(s.Env); n > MaxEnvBytes {
		errs.add("spec.env", "holds %d bytes, over the limit of %d", n, MaxEnvBytes)
	}
	if s.StopTimeoutSeconds < 0 {
		errs.add("spec.stopTimeoutSeconds", "must be 0 or more")
	}
	for _, k := range sortedStringKeys(s.Env) {
		switch {
		case !envNameRe.MatchString(k):
			errs.add(childPath("spec.env", k), "invalid environment variable name")
		case k == "PORT" || strings.HasPrefix(k, "GANTRY_"):
			errs.add(childPath("spec.env", k), "reserved: Gantry sets PORT and GANTRY_* itself")
		}
	}
	ports := map[string]bool{}
	for i, p := range s.Ports {
		path := indexPath("spec.ports", i)
		switch {
		case p.Name == "":
			errs.add(path+".name", "required")
		case len(p.Name) > 15 || !dnsLabel.MatchString(p.Name):
			errs.add(path+".name", "%q is not a valid port name (lowercase letters, digits, hyphens; at most 15)", p.Name)
		case ports[p.Name]:
			errs.add(path+".name", "duplicate port name %q", p.Name)
		}
		ports[p.Name] = true
		switch {
		case p.ContainerPort < 0 || p.ContainerPort > 65535:
			errs.add(path+".containerPort", "must be between 1 and 65535, got %d", p.ContainerPort)
		case p.ContainerPort == 0 && s.Image != "":
			errs.add(path+".containerPort", "required for a service with an image: the port its container listens on")
		}
		if p.Protocol != "tcp" && p.Protocol != "udp" {
			errs.add(path+".protocol", "unknown protocol %q (want tcp or udp)", p.Protocol)
		}
	}
	errs = append(errs, validateExpose(s.Expose, ports)...)
	errs = append(errs, validateResources(s.Resources)...)
	if s.HealthCheck != nil {
		errs = append(errs, validateHealthCheck(*s.HealthCheck, ports)...)
	}
	if !contains([]string{api.IsolationAny, api.IsolationTEERequired, api.IsolationTEEPreferred, api.IsolationStandardRequired}, s.Isolation) {
		errs.add("spec.isolation", "unknown isolation %q (want any, teeRequired, teePreferred or standardRequired)", s.Isolation)
	}
	errs = append(errs, validatePlacement(s.Placement)...)
	errs = append(errs, validateUpdate(s.Update)...)
	errs = append(errs, validateRunnable(s)...)
	return errs
}

// validateExpose checks a service's exposed ports against its ports.
func validateExpose(exposed []api.Expose, ports map[string]bool) ErrorList {
	var errs ErrorList
	public := map[int]bool{}
	for i, e := range exposed {
		path := indexPath("spec.expose", i)
		switch {
		case e.Port < 1 || e.Port > 65535:
			errs.add(path+".port", "must be between 1 and 65535, got %d", e.Port)
		case public[e.Port]:
			errs.add(path+".port", "port %d is exposed twice", e.Port)
		}
		public[e.Port] = true
		switch {
		case len(ports) == 0:
			errs.add(path, "the service declares no ports to expose (spec.ports)")
		case !ports[e.TargetPort]:
			errs.add(path+".targetPort", "port %q is not declared in spec.ports", e.TargetPort)
		}
		if e.Protocol != api.ExposeHTTP && e.Protocol != api.ExposeTCP {
			errs.add(path+".protocol", "unknown protocol %q (want http or tcp)", e.Protocol)
		}
	}
	return errs
}

func validateResources(r api.ServiceResources) ErrorList {
	errs := validateAmounts("spec.resources", api.ResourceAmounts{CPU: r.CPU, Memory: r.Memory, EphemeralStorage: r.EphemeralStorage})
	if g := r.GPU; g != nil {
		if g.Count < 1 {
			errs.add("spec.resources.gpu.count", "must be at least 1")
		}
		if g.MinVRAMGB < 0 {
			errs.add("spec.resources.gpu.minVramGB", "must be 0 or more")
		}
		if g.Policy != api.GPURequired && g.Policy != api.GPUPreferred {
			errs.add("spec.resources.gpu.policy", "unknown policy %q (want required or preferred)", g.Policy)
		}
	}
	return errs
}

func validateHealthCheck(h api.HealthCheck, ports map[string]bool) ErrorList {
	var errs ErrorList
	set := 0
	for _, present := range []bool{h.HTTP != nil, h.TCP != nil, h.Exec != nil} {
		if present {
			set++
		}
	}
	if set != 1 {
		errs.add("spec.healthCheck", "exactly one of http, tcp or exec is required")
	}
	checkPort := func(path, name string) {
		if name == "" {
			errs.add(path, "required")
		} else if !ports[name] {
			errs.add(path, "port %q is not declared in spec.ports", name)
		}
	}
	if h.HTTP != nil {
		checkPort("spec.healthCheck.http.port", h.HTTP.Port)
		if !strings.HasPrefix(h.HTTP.Path, "/") {
			errs.add("spec.healthCheck.http.path", "must start with /")
		}
	}
	if h.TCP != nil {
		checkPort("spec.healthCheck.tcp.port", h.TCP.Port)
	}
	if h.Exec != nil && len(h.Exec.Command) == 0 {
		errs.add("spec.healthCheck.exec.command", "required")
	}
	if h.IntervalSeconds < 1 {
		errs.add("spec.healthCheck.intervalSeconds", "must be at least 1")
	}
	if h.TimeoutSeconds < 1 {
		errs.add("spec.healthCheck.timeoutSeconds", "must be at least 1")
	}
	if h.FailureThreshold < 1 {
		errs.add("spec.healthCheck.failureThreshold", "must be at least 1")
	}
	if h.SuccessThreshold < 0 {
		errs.add("spec.healthCheck.successThreshold", "must be 0 or more")
	}
	return errs
}

func validatePlacement(p api.Placement) ErrorList {
	var errs ErrorList
	if p.Scoring != "" && p.Scoring != api.ScoringBinpack && p.Scoring != api.ScoringSpread {
		errs.add("spec.placement.scoring", "unknown scoring %q (want binpack or spread)", p.Scoring)
	}
	for _, r := range p.Spread {
		if r.Key == api.SpreadZone && p.SameZone {
			errs.add("spec.placement.sameZone", "contradicts a zone spread rule")
		}
	}
	for i, g := range p.CapacityGroups {
		if !groupIDRe.MatchString(g) {
			errs.add(indexPath("spec.placement.capacityGroups", i), "%q is not a valid groupId", g)
		}
	}
	errs = append(errs, validateLabels("spec.placement.nodeSelector", p.NodeSelector)...)
	for i, r := range p.Spread {
		path := indexPath("spec.placement.spread", i)
		if r.Key != api.SpreadZone && r.Key != api.SpreadMachine {
			errs.add(path+".key", "unknown spread key %q (want zone or machine)", r.Key)
		}
		if r.MaxSkew < 1 {
			errs.add(path+".maxSkew", "must be at least 1")
		}
	}
	errs = append(errs, validateAffinity("spec.placement.affinity", p.Affinity)...)
	errs = append(errs, validateAffinity("spec.placement.antiAffinity", p.AntiAffinity)...)
	return errs
}

// MaxAffinityWeight bounds a preferred term's weight (as Kubernetes does).
const MaxAffinityWeight = 100

func validateAffinity(path string, terms []api.AffinityTerm) ErrorList {
	var errs ErrorList
	for i, t := range terms {
		at := indexPath(path, i)
		if len(t.Selector) == 0 {
			errs.add(at+".selector", "required: the labels of the replicas it selects")
		}
		errs = append(errs, validateLabels(at+".selector", t.Selector)...)
		if t.Topology != api.SpreadMachine && t.Topology != api.SpreadZone {
			errs.add(at+".topology", "must be machine or zone, got %q", t.Topology)
		}
		switch {
		case t.Mode != api.AffinityRequired && t.Mode != api.AffinityPreferred:
			errs.add(at+".mode", "must be required or preferred, got %q", t.Mode)
		case t.Mode == api.AffinityPreferred && (t.Weight < 1 || t.Weight > MaxAffinityWeight):
			errs.add(at+".weight", "a preferred term needs a weight from 1 to %d", MaxAffinityWeight)
		case t.Mode == api.AffinityRequired && t.Weight != 0:
			errs.add(at+".weight", "only preferred terms have a weight")
		}
	}
	return errs
}

func typeNames(catalog []provisioner.InstanceType) []string {
	names := make([]string, len(catalog))
	for i, t := range catalog {
		names[i] = t.Name
	}
	sort.Strings(names)
	return names
}

func sortedStringKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// machineIDRe is a DNS label: what a hand-joined machine may call itself.
var machineIDRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ValidateMachineID checks the id a machine asks for when it joins by
// hand: a DNS label (lowercase letters, digits, hyphens; at most 63), so
// it is safe in paths, credentials, names and terminals.
func ValidateMachineID(id string) error {
	if len(id) > 63 || !machineIDRe.MatchString(id) {
		shown := id
		if len(shown) > 70 {
			shown = shown[:70] + "…"
		}
		return fmt.Errorf("%q is not a valid machine id (lowercase letters, digits and hyphens, starting and ending with a letter or digit, at most 63 characters)", shown)
	}
	return nil
}
