package api

// Resources are normalized amounts: millicores, bytes and GPU count.
type Resources struct {
	MilliCPU       int64 `json:"milliCpu"`
	MemoryBytes    int64 `json:"memoryBytes"`
	EphemeralBytes int64 `json:"ephemeralStorageBytes"`
	GPUs           int   `json:"gpus,omitempty"`
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.MemoryBytes + o.MemoryBytes, r.EphemeralBytes + o.EphemeralBytes, r.GPUs + o.GPUs}
}

// Sub returns r − o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.MilliCPU - o.MilliCPU, r.MemoryBytes - o.MemoryBytes, r.EphemeralBytes - o.EphemeralBytes, r.GPUs - o.GPUs}
}

// Fits reports whether o fits within r in every dimension.
func (r Resources) Fits(o Resources) bool {
	return o.MilliCPU <= r.MilliCPU && o.MemoryBytes <= r.MemoryBytes &&
		o.EphemeralBytes <= r.EphemeralBytes && o.GPUs <= r.GPUs
}

// NonNegative reports whether every dimension is ≥ 0.
func (r Resources) NonNegative() bool {
	return r.MilliCPU >= 0 && r.MemoryBytes >= 0 && r.EphemeralBytes >= 0 && r.GPUs >= 0
}
