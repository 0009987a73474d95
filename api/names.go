package api

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
}

// ClusterNames are every name of a cluster, as its agents answer them.
// Version changes whenever an answer does (agents wait for a version
// other than theirs).
type ClusterNames struct {
	Cluster string       `json:"cluster"`
	Version string       `json:"version"`
	Records []NameRecord `json:"records"`
}
