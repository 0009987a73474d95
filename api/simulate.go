package api

import "time"

// KindTrace names a stored trace in events.
const KindTrace = "Trace"

// Trace is a demand trace kept on the server for simulations (its rows
// are the CSV form of docs/simulate.md, read back as text/csv).
type Trace struct {
	Name string `json:"name"`
	// Rows are its rows after the header; Services the services they name.
	Rows     int      `json:"rows"`
	Services []string `json:"services"`
	// Start and End are its first and last rows' times.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Bytes is the size of its CSV.
	Bytes     int       `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
}

// SimulationRequest runs a stored trace through the control loop, on the
// server's stored spec, once per policy (`gantry simulate` on the
// server; docs/simulate.md).
type SimulationRequest struct {
	// Trace is the stored trace's name.
	Trace string `json:"trace"`
	// Policies are the runs to compare (none: the server's own settings).
	Policies []SimulationPolicy `json:"policies,omitempty"`
	// Seed draws the world's latencies, capacity errors and
	// interruptions (0: 1).
	Seed uint64 `json:"seed,omitempty"`
	// World is a world file's YAML (`gantry simulate --world`): the
	// latencies and odds it sets replace the defaults (the local
	// provider's when every simulated cluster is on it, else a public
	// cloud's).
	World string `json:"world,omitempty"`
}

// SimulationPolicy is one run's settings: keys of `gantry simulate`
// policy files (the server's decision flags, capacity-type, warm-pool,
// warm-pool-state), over the server's own settings.
type SimulationPolicy struct {
	Name     string            `json:"name"`
	Settings map[string]string `json:"settings,omitempty"`
}
