package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
)

// ServerConfig is where the server sends its traces and metrics.
type ServerConfig struct {
	// Endpoint is the OTLP/HTTP base URL (http://collector:4318); the
	// signals' paths (/v1/traces, /v1/metrics) are added. Empty: the
	// standard OTEL_EXPORTER_OTLP_* variables decide, and without any
	// nothing is exported.
	Endpoint string
	// MetricInterval is how often metrics are sent.
	MetricInterval time.Duration
	// Name is this server's instance (service.instance.id).
	Name    string
	Version string
}

// Server exports one server's traces and metrics.
type Server struct {
	traces *sdktrace.TracerProvider
	meters *sdkmetric.MeterProvider
}

// Enabled reports whether cfg or the environment asks for export:
// OTEL_SDK_DISABLED=true turns it off whatever else is set.
func (cfg ServerConfig) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return cfg.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// StartServer starts exporting traces, and the metrics gatherer
// collects, when cfg.Enabled(); else it returns nil.
func StartServer(ctx context.Context, cfg ServerConfig, gatherer prometheus.Gatherer) (*Server, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("gantry-server"), semconv.ServiceVersion(cfg.Version), semconv.ServiceInstanceID(cfg.Name)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	// The environment's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) wins.
	if envRes, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		res, _ = resource.Merge(res, envRes)
	}
	traceExp, metricExp, err := serverExporters(ctx, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	reader := sdkmetric.NewPeriodicReader(metricExp, sdkmetric.WithInterval(cfg.MetricInterval),
		sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(gatherer))))
	return &Server{
		traces: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(traceExp)),
		meters: sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader)),
	}, nil
}

// serverExporters makes the trace and metric exporters for the protocol
// OTEL_EXPORTER_OTLP_PROTOCOL names: http/protobuf (the default) or grpc.
// The exporters read the other OTEL_EXPORTER_OTLP_* variables themselves;
// endpoint, when set, overrides theirs.
func serverExporters(ctx context.Context, endpoint string) (sdktrace.SpanExporter, sdkmetric.Exporter, error) {
	protocol := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	switch protocol {
	case "grpc":
		var traceOpts []otlptracegrpc.Option
		var metricOpts []otlpmetricgrpc.Option
		if endpoint != "" {
			traceOpts = append(traceOpts, otlptracegrpc.WithEndpointURL(endpoint))
			metricOpts = append(metricOpts, otlpmetricgrpc.WithEndpointURL(endpoint))
		}
		traces, err := otlptracegrpc.New(ctx, traceOpts...)
		if err != nil {
			return nil, nil, fmt.Errorf("OTLP/gRPC trace exporter: %w", err)
		}
		metrics, err := otlpmetricgrpc.New(ctx, metricOpts...)
		if err != nil {
			return nil, nil, fmt.Errorf("OTLP/gRPC metric exporter: %w", err)
		}
		return traces, metrics, nil
	case "http/protobuf":
		var traceOpts []otlptracehttp.Option
		var metricOpts []otlpmetrichttp.Option
		if endpoint != "" {
			tracesURL, err := signalURL(endpoint, "/v1/traces")
			if err != nil {
				return nil, nil, fmt.Errorf("--otlp-endpoint: %w", err)
			}
			metricsURL, _ := signalURL(endpoint, "/v1/metrics")
			traceOpts = append(traceOpts, otlptracehttp.WithEndpointURL(tracesURL))
			metricOpts = append(metricOpts, otlpmetrichttp.WithEndpointURL(metricsURL))
		}
		traces, err := otlptracehttp.New(ctx, traceOpts...)
		if err != nil {
			return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		metrics, err := otlpmetrichttp.New(ctx, metricOpts...)
		if err != nil {
			return nil, nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		return traces, metrics, nil
	}
	return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: want grpc or http/protobuf, got %q", protocol)
}

// Tracer is where the server's spans go (nil when not exporting).
func (s *Server) Tracer() trace.Tracer {
	if s == nil {
		return nil
	}
	return s.traces.Tracer("gantry/server")
}

// Shutdown sends what is buffered and stops.
func (s *Server) Shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return errors.Join(s.traces.Shutdown(ctx), s.meters.Shutdown(ctx))
}
