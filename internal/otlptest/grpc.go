package otlptest

import (
	"context"
	"net"
	"net/http"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// StartGRPC is Start for OTLP over gRPC (plaintext, loopback): URL is
// http://127.0.0.1:port, as OTLP/gRPC exporters take it.
func StartGRPC() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), arrived: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	collogs.RegisterLogsServiceServer(srv, grpcLogs{r: r})
	colmetrics.RegisterMetricsServiceServer(srv, grpcMetrics{r: r})
	coltrace.RegisterTraceServiceServer(srv, grpcTraces{r: r})
	r.stop = srv.Stop
	go func() { _ = srv.Serve(ln) }()
	return r, nil
}

// headersOf turns gRPC metadata into HTTP headers, as they were sent.
func headersOf(ctx context.Context) http.Header {
	h := http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

type grpcLogs struct {
	collogs.UnimplementedLogsServiceServer
	r *Receiver
}

func (g grpcLogs) Export(ctx context.Context, req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	g.r.keep(req, headersOf(ctx))
	return &collogs.ExportLogsServiceResponse{}, nil
}

type grpcMetrics struct {
	colmetrics.UnimplementedMetricsServiceServer
	r *Receiver
}

func (g grpcMetrics) Export(ctx context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	g.r.keep(req, headersOf(ctx))
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

type grpcTraces struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcTraces) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.r.keep(req, headersOf(ctx))
	return &coltrace.ExportTraceServiceResponse{}, nil
}
