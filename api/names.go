package api

import "net/netip"

// NameDomain is the DNS zone agents answer: <service>.<cluster>.gantry.
const NameDomain = "gantry."

// ServiceName is the DNS name of a service (or a FailoverGroup) in a
// cluster.
func ServiceName(name, cluster string) string {
	return name + "." + cluster + "." + NameDomain
}

// Endpoint is one replica of a service as traffic sees it: where it
// serves, and whether it is in the service's name (and why not).
type Endpoint struct {
	Replica string `json:"replica"`
	Machine string `json:"machine,omitempty"`
	// Revision is the replica's revision (its spec hash).
	Revision string `json:"revision,omitempty"`
	// Address is where the replica is reached (the machine's address in
	// host network mode); Ports its named ports there.
	Address string         `json:"address,omitempty"`
	Ports   map[string]int `json:"ports,omitempty"`
	// Weight is its share of requests relative to the others (SRV weight).
	Weight  int    `json:"weight"`
	Serving bool   `json:"serving"`
	Reason  string `json:"reason"`
}

// ServiceEndpoints is a service's endpoints: every replica, serving or
// not, with why.
type ServiceEndpoints struct {
	Service string `json:"service"`
	Cluster string `json:"cluster"`
	// Name is the DNS name that answers the serving endpoints.
	Name      string     `json:"name"`
	Endpoints []Endpoint `json:"endpoints"`
}

// NameRecord is what one DNS name answers: the serving endpoints only.
type NameRecord struct {
	Name    string     `json:"name"`
	Targets []Endpoint `json:"targets"`
	// Removed, in a delta, are the replicas that left the record
	// (Targets then holds only those added or changed).
	Removed []string `json:"removed,omitempty"`
}

// ClusterNames are every name of a cluster, as its agents answer them.
// Version changes whenever an answer does (agents wait for a version
// other than theirs).
type ClusterNames struct {
	Cluster string       `json:"cluster"`
	Version string       `json:"version"`
	Records []NameRecord `json:"records"`
	// Ingress are the cluster's exposed ports, which its edge machines
	// serve.
	Ingress []IngressRoute `json:"ingress,omitempty"`
	// EdgeGroups are the capacity groups whose machines serve Ingress
	// (none: every machine of the cluster does).
	EdgeGroups []string `json:"edgeGroups,omitempty"`
	// Mesh is the overlay of a cluster in overlay or routed mode (nil
	// otherwise).
	Mesh *MeshConfig `json:"mesh,omitempty"`

	// Base, when set, makes these names a delta from the names of that
	// version (asked for with delta=true): Records are the records that
	// changed, each with its targets added or changed and the replicas
	// Removed; RemovedRecords the names gone; Kept the parts (ingress,
	// edgeGroups, mesh) left as they were and not repeated.
	Base           string   `json:"base,omitempty"`
	RemovedRecords []string `json:"removedRecords,omitempty"`
	Kept           []string `json:"kept,omitempty"`
}

// MeshConfig is what a machine needs to join its cluster's overlay.
type MeshConfig struct {
	// Mode is overlay (a WireGuard mesh between the machines) or routed
	// (the provider's network routes each machine's /24 to it: the machine
	// only holds its addresses; keys and endpoints are unused).
	Mode string `json:"mode,omitempty"`
	// ContainerCIDR is what the overlay carries.
	ContainerCIDR string `json:"containerCidr"`
	// Peers are the cluster's live machines with a /24, each machine's
	// own entry included (its key empty until it reported one).
	Peers []MeshPeer `json:"peers"`
}

// MeshPeer is one machine of an overlay.
type MeshPeer struct {
	Machine   string `json:"machine"`
	PublicKey string `json:"publicKey,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	Subnet    string `json:"subnet"`
}

// MeshAddress is a machine's address in the overlay: its /24's first
// address ("" for a subnet that does not parse).
func MeshAddress(subnet string) string {
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		return ""
	}
	return p.Masked().Addr().Next().String()
}

// Serves says whether the machines of a capacity group serve the
// cluster's exposed ports.
func (n ClusterNames) Serves(group string) bool {
	if len(n.EdgeGroups) == 0 {
		return true
	}
	for _, g := range n.EdgeGroups {
		if g == group {
			return true
		}
	}
	return false
}

// Expose is a public port of a service on its cluster's edge machines.
type Expose struct {
	// Port is the port edge machines listen on.
	Port int `json:"port"`
	// TargetPort names the service's port the traffic goes to (default:
	// its first).
	TargetPort string `json:"targetPort,omitempty"`
	// Protocol is http (requests balanced one by one, retried on another
	// replica when one cannot be reached) or tcp (connections balanced).
	Protocol string `json:"protocol,omitempty"`
}

// Expose protocols.
const (
	ExposeHTTP = "http"
	ExposeTCP  = "tcp"
)

// IngressRoute is one exposed port as edge machines serve it: the
// serving replicas behind it, each at its address and target port.
type IngressRoute struct {
	// Name is the service (or failover group) exposed.
	Name     string          `json:"name"`
	Port     int             `json:"port"`
	Protocol string          `json:"protocol"`
	Backends []IngressTarget `json:"backends"`
}

// IngressTarget is one replica behind an exposed port.
type IngressTarget struct {
	Replica string `json:"replica"`
	Address string `json:"address"`
	Port    int    `json:"port"`
	Weight  int    `json:"weight"`
}
