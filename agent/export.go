package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/telemetry"
)

// startTelemetry starts the OTLP export the server gave at join, if any:
// from then on the agent's own log records go there too.
func (a *Agent) startTelemetry(ctx context.Context) {
	mon, err := a.Monitoring()
	if err != nil || mon == nil {
		return
	}
	local := a.log
	tel, err := telemetry.StartAgent(ctx, a.cfg.Telemetry, mon, telemetry.Machine{Cluster: a.cfg.Cluster, Group: a.cfg.Group, ID: a.machineID, Version: a.cfg.Version}, local)
	if err != nil {
		a.log.Warn("OTLP export not started", "err", err)
		return
	}
	if tel == nil {
		return
	}
	a.telemetry = tel
	if h := tel.Handler(); h != nil {
		a.log = slog.New(slog.NewMultiHandler(local.Handler(), h))
	}
	if err := a.registerMetrics(tel.Meter()); err != nil {
		a.log.Warn("agent metrics not registered", "err", err)
	}
	a.log.Info("exporting over OTLP", "logs", mon.LogsEndpoint != "", "metrics", mon.MetricsEndpoint != "")
}

func (a *Agent) stopTelemetry() {
	if a.telemetry == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Telemetry.Queue.ExportTimeout)
	defer cancel()
	_ = a.telemetry.Shutdown(ctx)
}

// registerMetrics exports the agent's replicas by state and its
// heartbeats.
func (a *Agent) registerMetrics(meter metric.Meter) error {
	replicas, err := meter.Int64ObservableGauge("gantry.agent.replicas", metric.WithDescription("Replicas on this machine, by state."))
	if err != nil {
		return err
	}
	if a.heartbeats, err = meter.Int64Counter("gantry.agent.heartbeats", metric.WithDescription("Heartbeats sent, by result (ok or failed).")); err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		counts := map[api.ReplicaState]int64{}
		for _, st := range a.statuses() {
			counts[st.State]++
		}
		for state, n := range counts {
			o.ObserveInt64(replicas, n, metric.WithAttributes(attribute.String("state", string(state))))
		}
		return nil
	}, replicas)
	return err
}

// countHeartbeat counts one heartbeat sent, by result.
func (a *Agent) countHeartbeat(ctx context.Context, err error) {
	if a.heartbeats == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "failed"
	}
	a.heartbeats.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
}

// untilDone is a context that ends when done closes.
func untilDone(ctx context.Context, done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() { <-done; cancel() }()
	return ctx
}

// shipOutput follows one replica's output and sends each line as an
// OTLP log record, until ctx ends. fromStart reads what the replica wrote
// before (a replica this agent starts); an adopted replica's earlier
// output was shipped by the agent before.
func (a *Agent) shipOutput(ctx context.Context, as api.Assignment, fromStart bool) {
	logger := a.telemetry.ReplicaLogger(as.Service, as.ReplicaID, as.SpecHash)
	reader, ok := a.driver.(runtime.LogReader)
	if logger == nil || !ok {
		return
	}
	tail := 0
	if fromStart {
		tail = -1
	}
	for ctx.Err() == nil {
		rc, err := reader.Logs(ctx, a.machineID, as.ReplicaID, runtime.LogOptions{Follow: true, Tail: tail})
		if err == nil {
			emitLines(ctx, rc, logger)
			rc.Close()
		}
		tail = 0 // a reopened stream goes on from its end
		select {
		case <-ctx.Done():
		case <-time.After(a.cfg.RetryInterval):
		}
	}
}

// maxLine splits longer lines into several records.
const maxLine = 64 << 10

func emitLines(ctx context.Context, r io.Reader, logger otellog.Logger) {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			var rec otellog.Record
			now := time.Now()
			rec.SetTimestamp(now)
			rec.SetObservedTimestamp(now)
			rec.SetBody(attribute.StringValue(string(trimNewline(line))))
			logger.Emit(ctx, rec)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
