// Package otlptest is an OTLP receiver for tests (HTTP, and gRPC): it listens on
// loopback, decodes what exporters send with the official OTLP protobuf
// types, and keeps it with the headers it came with.
package otlptest

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps every request it was sent.
type Receiver struct {
	URL string

	stop    func()
	arrived chan struct{} // signalled (without blocking) on each request
	mu      sync.Mutex
	logs    []LogRecord
	metrics []string
	spans   []Span
	headers []http.Header
}

// LogRecord is one received log record with its resource's attributes.
type LogRecord struct {
	Resource map[string]string
	Body     string
	Attrs    map[string]string
}

// Span is one received span with its resource's attributes.
type Span struct {
	Resource map[string]string
	Name     string
	Attrs    map[string]string
}

// Start listens on a loopback port until Close.
func Start() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), arrived: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/logs", r.handle(&collogs.ExportLogsServiceRequest{}, &collogs.ExportLogsServiceResponse{}))
	mux.HandleFunc("POST /v1/metrics", r.handle(&colmetrics.ExportMetricsServiceRequest{}, &colmetrics.ExportMetricsServiceResponse{}))
	mux.HandleFunc("POST /v1/traces", r.handle(&coltrace.ExportTraceServiceRequest{}, &coltrace.ExportTraceServiceResponse{}))
	srv := &http.Server{Handler: mux}
	r.stop = func() { _ = srv.Close() }
	go func() { _ = srv.Serve(ln) }()
	return r, nil
}

// Close stops listening.
func (r *Receiver) Close() { r.stop() }

func (r *Receiver) handle(req, resp proto.Message) http.HandlerFunc {
	return func(w http.ResponseWriter, hr *http.Request) {
		body, err := io.ReadAll(hr.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msg := proto.Clone(req)
		proto.Reset(msg)
		if err := proto.Unmarshal(body, msg); err != nil {
			http.Error(w, "decode: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.keep(msg, hr.Header.Clone())
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}
}

func (r *Receiver) keep(msg proto.Message, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		select {
		case r.arrived <- struct{}{}:
		default:
		}
	}()
	r.headers = append(r.headers, h)
	switch m := msg.(type) {
	case *collogs.ExportLogsServiceRequest:
		for _, rl := range m.GetResourceLogs() {
			res := attrs(rl.GetResource().GetAttributes())
			for _, sl := range rl.GetScopeLogs() {
				for _, lr := range sl.GetLogRecords() {
					r.logs = append(r.logs, LogRecord{Resource: res, Body: lr.GetBody().GetStringValue(), Attrs: attrs(lr.GetAttributes())})
				}
			}
		}
	case *colmetrics.ExportMetricsServiceRequest:
		for _, rm := range m.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, metric := range sm.GetMetrics() {
					r.metrics = append(r.metrics, metric.GetName())
				}
			}
		}
	case *coltrace.ExportTraceServiceRequest:
		for _, rs := range m.GetResourceSpans() {
			res := attrs(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					r.spans = append(r.spans, Span{Resource: res, Name: sp.GetName(), Attrs: attrs(sp.GetAttributes())})
				}
			}
		}
	}
}

func attrs(kvs []*common.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Logs are the log records received so far.
func (r *Receiver) Logs() []LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]LogRecord(nil), r.logs...)
}

// Metrics are the names of the metrics received so far (with repeats).
func (r *Receiver) Metrics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.metrics...)
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers are the headers of every request received so far.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// WaitFor returns true once ok holds, checking it each time a request
// arrives, or false when ctx ends first.
func (r *Receiver) WaitFor(ctx context.Context, ok func() bool) bool {
	for !ok() {
		select {
		case <-r.arrived:
		case <-ctx.Done():
			return ok()
		}
	}
	return true
}
