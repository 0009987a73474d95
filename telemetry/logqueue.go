// Package telemetry exports Gantry's own signals over OTLP with the
// OpenTelemetry SDK: an agent's logs, its replicas' output and its
// metrics to the cluster's monitoring endpoints, and the server's traces
// and metrics to the collector it is pointed at.
package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// QueueConfig bounds a LogQueue.
type QueueConfig struct {
	// QueueSize is how many records may wait; beyond it records are
	// dropped (and counted), never waited for.
	QueueSize int
	// BatchSize is the most records sent in one request; FlushInterval
	// the longest a record waits for a batch to fill.
	BatchSize     int
	FlushInterval time.Duration
	// ExportTimeout bounds one request; a batch that fails is dropped
	// (and counted): memory stays bounded while the endpoint is down.
	ExportTimeout time.Duration
}

// DefaultQueueConfig returns the defaults.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{QueueSize: 8192, BatchSize: 512, FlushInterval: time.Second, ExportTimeout: 5 * time.Second}
}

// Validate names the first knob out of range.
func (c QueueConfig) Validate() error {
	switch {
	case c.QueueSize < 1:
		return errors.New("telemetry queue: QueueSize must be at least 1")
	case c.BatchSize < 1:
		return errors.New("telemetry queue: BatchSize must be at least 1")
	case c.FlushInterval <= 0 || c.ExportTimeout <= 0:
		return errors.New("telemetry queue: FlushInterval and ExportTimeout must be positive")
	}
	return nil
}

// LogStats counts what a LogQueue did with its records.
type LogStats struct {
	Exported int64
	// DroppedFull were refused because the queue was full; DroppedFailed
	// were in batches the endpoint did not take.
	DroppedFull   int64
	DroppedFailed int64
}

// Dropped is every record lost.
func (s LogStats) Dropped() int64 { return s.DroppedFull + s.DroppedFailed }

// LogQueue is an OpenTelemetry log processor that never blocks the code
// that emits: records go into a bounded queue, one goroutine sends them in
// batches through the exporter, and what does not fit or fails to send is
// dropped and counted.
type LogQueue struct {
	cfg      QueueConfig
	exporter sdklog.Exporter
	log      *slog.Logger
	queue    chan sdklog.Record
	flushes  chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once

	exported, droppedFull, droppedFailed atomic.Int64
	failing                              atomic.Bool
}

var _ sdklog.Processor = (*LogQueue)(nil)

// NewLogQueue starts a queue exporting through exporter.
func NewLogQueue(cfg QueueConfig, exporter sdklog.Exporter, log *slog.Logger) (*LogQueue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &LogQueue{cfg: cfg, exporter: exporter, log: log, queue: make(chan sdklog.Record, cfg.QueueSize),
		flushes: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q, nil
}

// Enabled: every record is wanted.
func (q *LogQueue) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

// OnEmit queues a copy of the record, or drops it when the queue is full.
func (q *LogQueue) OnEmit(_ context.Context, r *sdklog.Record) error {
	select {
	case q.queue <- r.Clone():
	default:
		q.droppedFull.Add(1)
	}
	return nil
}

// ForceFlush sends what is queued now.
func (q *LogQueue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flushes <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown sends what is queued and stops. Loggers sharing the queue must
// not call it through their own providers: its owner does, once.
func (q *LogQueue) Shutdown(ctx context.Context) error {
	q.once.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exporter.Shutdown(ctx)
}

// Stats reads the counters.
func (q *LogQueue) Stats() LogStats {
	return LogStats{Exported: q.exported.Load(), DroppedFull: q.droppedFull.Load(), DroppedFailed: q.droppedFailed.Load()}
}

func (q *LogQueue) run() {
	defer close(q.done)
	ticker := time.NewTicker(q.cfg.FlushInterval)
	defer ticker.Stop()
	batch := make([]sdklog.Record, 0, q.cfg.BatchSize)
	for {
		select {
		case r := <-q.queue:
			if batch = append(batch, r); len(batch) >= q.cfg.BatchSize {
				batch = q.send(batch)
			}
		case <-ticker.C:
			batch = q.send(batch)
		case ack := <-q.flushes:
			batch = q.send(q.drain(batch))
			close(ack)
		case <-q.stop:
			q.send(q.drain(batch))
			return
		}
	}
}

// drain moves what is queued now into batches, sending full ones.
func (q *LogQueue) drain(batch []sdklog.Record) []sdklog.Record {
	for {
		select {
		case r := <-q.queue:
			if batch = append(batch, r); len(batch) >= q.cfg.BatchSize {
				batch = q.send(batch)
			}
		default:
			return batch
		}
	}
}

// send exports one batch and returns the emptied slice.
func (q *LogQueue) send(batch []sdklog.Record) []sdklog.Record {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.ExportTimeout)
	err := q.exporter.Export(ctx, batch)
	cancel()
	n := int64(len(batch))
	if err != nil {
		q.droppedFailed.Add(n)
		if !q.failing.Swap(true) { // once per outage, not once per batch
			q.log.Warn("OTLP log export failing; records are dropped until it recovers", "records", n, "err", err)
		}
	} else {
		q.exported.Add(n)
		if q.failing.Swap(false) {
			q.log.Info("OTLP log export recovered")
		}
	}
	clear(batch)
	return batch[:0]
}
