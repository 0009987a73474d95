package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/gantry-dev/gantry/api"
)

// Resource attribute keys Gantry sets on what a machine exports.
const (
	AttrCluster  = "gantry.cluster"
	AttrGroup    = "gantry.group"
	AttrMachine  = "gantry.machine"
	AttrService  = "gantry.service"
	AttrReplica  = "gantry.replica"
	AttrRevision = "gantry.revision"
)

// AgentConfig tunes an agent's export.
type AgentConfig struct {
	Queue QueueConfig
	// MetricInterval is how often metrics are sent.
	MetricInterval time.Duration
}

// DefaultAgentConfig returns the defaults.
func DefaultAgentConfig() AgentConfig {
	return AgentConfig{Queue: DefaultQueueConfig(), MetricInterval: 15 * time.Second}
}

// Machine names the machine whose signals are exported.
type Machine struct {
	Cluster, Group, ID, Version string
}

// Agent exports one machine's signals. A nil *Agent exports nothing.
type Agent struct {
	machine Machine
	base    *resource.Resource
	logs    *LogQueue
	own     *sdklog.LoggerProvider
	meters  *sdkmetric.MeterProvider
}

// StartAgent starts the export mon asks for: logs when it has a logs
// endpoint, metrics when it has a metrics endpoint. With neither it
// returns nil (nothing to export). log is where the export's own trouble
// is told (it must not be a logger that exports through this agent).
func StartAgent(ctx context.Context, cfg AgentConfig, mon *api.AgentMonitoring, m Machine, log *slog.Logger) (*Agent, error) {
	if mon == nil || (mon.LogsEndpoint == "" && mon.MetricsEndpoint == "") {
		return nil, nil
	}
	base, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("gantry-agent"), semconv.ServiceVersion(m.Version), semconv.HostName(m.ID),
		attribute.String(AttrCluster, m.Cluster), attribute.String(AttrGroup, m.Group), attribute.String(AttrMachine, m.ID)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	a := &Agent{machine: m, base: base}
	if mon.LogsEndpoint != "" {
		if err := a.startLogs(ctx, cfg.Queue, mon, log); err != nil {
			return nil, err
		}
	}
	if mon.MetricsEndpoint != "" {
		if err := a.startMetrics(ctx, cfg.MetricInterval, mon); err != nil {
			_ = a.Shutdown(ctx)
			return nil, err
		}
	}
	return a, nil
}

func (a *Agent) startLogs(ctx context.Context, cfg QueueConfig, mon *api.AgentMonitoring, log *slog.Logger) error {
	endpoint, err := signalURL(mon.LogsEndpoint, "/v1/logs")
	if err != nil {
		return fmt.Errorf("monitoring logs endpoint: %w", err)
	}
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(endpoint), otlploghttp.WithHeaders(mon.Headers),
		otlploghttp.WithTimeout(cfg.ExportTimeout), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		return fmt.Errorf("OTLP log exporter: %w", err)
	}
	if a.logs, err = NewLogQueue(cfg, exp, log); err != nil {
		return err
	}
	a.own = sdklog.NewLoggerProvider(sdklog.WithResource(a.base), sdklog.WithProcessor(a.logs))
	return nil
}

func (a *Agent) startMetrics(ctx context.Context, interval time.Duration, mon *api.AgentMonitoring) error {
	endpoint, err := signalURL(mon.MetricsEndpoint, "/v1/metrics")
	if err != nil {
		return fmt.Errorf("monitoring metrics endpoint: %w", err)
	}
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint), otlpmetrichttp.WithHeaders(mon.Headers),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	if err != nil {
		return fmt.Errorf("OTLP metric exporter: %w", err)
	}
	a.meters = sdkmetric.NewMeterProvider(sdkmetric.WithResource(a.base),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))))
	return a.countLogRecords()
}

// signalURL is endpoint, with the signal's default path when it has none
// (as OTEL_EXPORTER_OTLP_ENDPOINT is read).
func signalURL(endpoint, defaultPath string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want an http(s) URL, got %q", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = defaultPath
	}
	return u.String(), nil
}

// countLogRecords exports the log queue's counters as metrics.
func (a *Agent) countLogRecords() error {
	meter := a.Meter()
	records, err := meter.Int64ObservableCounter("gantry.agent.log_records", metric.WithDescription("Log records exported, or dropped (queue full, or the endpoint refused them)."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := a.LogStats()
		o.ObserveInt64(records, s.Exported, metric.WithAttributes(attribute.String("outcome", "exported")))
		o.ObserveInt64(records, s.DroppedFull, metric.WithAttributes(attribute.String("outcome", "dropped_queue_full")))
		o.ObserveInt64(records, s.DroppedFailed, metric.WithAttributes(attribute.String("outcome", "dropped_export_failed")))
		return nil
	}, records)
	return err
}

// Meter is where the agent's own instruments live (a no-op meter without
// a metrics endpoint).
func (a *Agent) Meter() metric.Meter {
	if a == nil || a.meters == nil {
		return noopMeter()
	}
	return a.meters.Meter("gantry/agent")
}

// Handler is a slog handler exporting the agent's own log records (nil
// without a logs endpoint).
func (a *Agent) Handler() slog.Handler {
	if a == nil || a.own == nil {
		return nil
	}
	return otelslog.NewHandler("gantry/agent", otelslog.WithLoggerProvider(a.own))
}

// ReplicaLogger is where one replica's output goes: its records carry
// the machine's resource and the replica's service, id and revision.
// Nil without a logs endpoint.
func (a *Agent) ReplicaLogger(service, replica, revision string) otellog.Logger {
	if a == nil || a.logs == nil {
		return nil
	}
	res, err := resource.Merge(a.base, resource.NewSchemaless(
		attribute.String(AttrService, service), attribute.String(AttrReplica, replica), attribute.String(AttrRevision, revision)))
	if err != nil {
		res = a.base
	}
	// The provider shares the queue and is never shut down itself: the
	// queue's owner is this Agent.
	return sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(a.logs)).Logger("gantry/replica")
}

// LogStats counts the log records exported and dropped.
func (a *Agent) LogStats() LogStats {
	if a == nil || a.logs == nil {
		return LogStats{}
	}
	return a.logs.Stats()
}

// Shutdown sends what is queued and stops.
func (a *Agent) Shutdown(ctx context.Context) error {
	if a == nil {
		return nil
	}
	var errs []error
	if a.logs != nil {
		errs = append(errs, a.logs.Shutdown(ctx))
	}
	if a.meters != nil {
		errs = append(errs, a.meters.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

func noopMeter() metric.Meter { return noop.NewMeterProvider().Meter("gantry/agent") }
