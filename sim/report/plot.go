package report

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gantry-dev/gantry/sim"
)

// Plot draws every policy's cost per hour and lower bound (above) and
// replicas waiting (below) over time, as SVG.
func Plot(w io.Writer, results []sim.Result) error {
	cost, pending := plot.New(), plot.New()
	cost.Title.Text = "Cost per hour (solid) and its lower bound (dashed)"
	cost.Y.Label.Text = "$/hour"
	pending.Title.Text = "Replicas waiting to run"
	pending.Y.Label.Text = "replicas"
	for _, p := range []*plot.Plot{cost, pending} {
		p.X.Tick.Marker = calendarTicks{}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	for i, r := range results {
		style := plotutil.Color(i)
		costXY, boundXY, pendingXY := series(r)
		costLine, err := plotter.NewLine(costXY)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		costLine.Color, costLine.Width = style, vg.Points(1.5)
		boundLine, err := plotter.NewLine(boundXY)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		boundLine.Color, boundLine.Dashes = style, []vg.Length{vg.Points(4), vg.Points(3)}
		pendingLine, err := plotter.NewLine(pendingXY)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		pendingLine.Color, pendingLine.Width = style, vg.Points(1.5)
		cost.Add(costLine, boundLine)
		cost.Legend.Add(r.Policy, costLine)
		pending.Add(pendingLine)
		pending.Legend.Add(r.Policy, pendingLine)
	}
	canvas := vgsvg.New(10*vg.Inch, 7*vg.Inch)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(14)}
	plots := [][]*plot.Plot{{cost}, {pending}}
	areas := plot.Align(plots, tiles, draw.New(canvas))
	cost.Draw(areas[0][0])
	pending.Draw(areas[1][0])
	if _, err := canvas.WriteTo(w); err != nil {
		return fmt.Errorf("write the plot: %w", err)
	}
	return nil
}

// series are a result's points: time (Unix seconds) against cost and
// bound per hour, and replicas waiting.
func series(r sim.Result) (cost, bound, pending plotter.XYs) {
	cost, bound, pending = make(plotter.XYs, len(r.Series)), make(plotter.XYs, len(r.Series)), make(plotter.XYs, len(r.Series))
	for i, p := range r.Series {
		x := float64(p.At.Unix())
		cost[i] = plotter.XY{X: x, Y: p.CostPerHour}
		bound[i] = plotter.XY{X: x, Y: p.BoundPerHour}
		pending[i] = plotter.XY{X: x, Y: p.Pending}
	}
	return cost, bound, pending
}
