package controller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/telemetry"
)

func (d Deps) tracer() trace.Tracer {
	if d.Tracer == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return d.Tracer
}

// decide runs the pure decision in a span that says what it decided.
func (c *Controller) decide(ctx context.Context, snap *decide.Snapshot, mem decide.Memory) decide.Plan {
	_, span := c.tracer().Start(ctx, "gantry.decide", trace.WithAttributes(
		attribute.Int("gantry.machines", len(snap.Machines)), attribute.Int("gantry.replicas", snap.ReplicaCount())))
	defer span.End()
	cfg := c.cfg.Decide
	cfg.Planner.SkipBound = true // the loop acts on the plan; DryRun and FromScratch report the bound
	plan := decide.Decide(cfg, snap, mem, c.Clock.Now())
	span.SetAttributes(
		attribute.Int("gantry.launches", len(plan.Launches)), attribute.Int("gantry.terminates", len(plan.Terminates)),
		attribute.Int("gantry.assignments", len(plan.Assignments)), attribute.Int("gantry.pending", len(plan.Pending)),
		attribute.Int("gantry.replicas_created", len(plan.CreateReplicas)), attribute.Int("gantry.replicas_deleted", len(plan.DeleteReplicas)),
		attribute.Float64("gantry.cost_after_per_hour", plan.Capacity.CostAfter))
	return plan
}

// endSpan ends span, marking it failed with err.
func endSpan(span trace.Span, err error) {
	telemetry.MarkFailed(span, err)
	span.End()
}
