package trace

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PriceChange is a row of a spot price trace: from At on, a spot machine
// of InstanceType in Zone costs PricePerHour.
type PriceChange struct {
	Line         int
	At           time.Time
	InstanceType string
	Zone         string
	PricePerHour float64
}

// Spot price trace columns, in this order, with a header.
var priceColumns = []string{"time", "instanceType", "zone", "price"}

// ReadSpotPrices reads a spot price trace: CSV with the header
// time,instanceType,zone,price, RFC 3339 times with a zone, in time order.
// offered says whether the catalog has a spot offering of a type in a
// zone. Every bad row is refused by line, up to ten.
func ReadSpotPrices(r io.Reader, offered func(instanceType, zone string) bool) ([]PriceChange, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("spot prices: the header: %w", err)
	}
	for i := range header {
		header[i] = strings.TrimSpace(header[i])
	}
	if !slices.Equal(header, priceColumns) {
		return nil, fmt.Errorf("spot prices: line 1: header %q, want %q", strings.Join(header, ","), strings.Join(priceColumns, ","))
	}
	var out []PriceChange
	err = eachRecord(cr, 2, "spot prices", func(line int, record []string) error {
		pc, err := priceRow(line, record, offered)
		if err == nil && len(out) > 0 && pc.At.Before(out[len(out)-1].At) {
			err = fmt.Errorf("line %d: %s is before the row above (%s): rows go in time order", line, pc.At.Format(time.RFC3339), out[len(out)-1].At.Format(time.RFC3339))
		}
		if err == nil {
			out = append(out, pc)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func priceRow(line int, record []string, offered func(instanceType, zone string) bool) (PriceChange, error) {
	fail := func(format string, a ...any) (PriceChange, error) {
		return PriceChange{}, fmt.Errorf("line %d: "+format, append([]any{line}, a...)...)
	}
	if len(record) != len(priceColumns) {
		return fail("%d columns, want %d (%s)", len(record), len(priceColumns), strings.Join(priceColumns, ","))
	}
	at, err := ParseTime(strings.TrimSpace(record[0]))
	if err != nil {
		return fail("time: %v", err)
	}
	pc := PriceChange{Line: line, At: at, InstanceType: strings.TrimSpace(record[1]), Zone: strings.TrimSpace(record[2])}
	if !offered(pc.InstanceType, pc.Zone) {
		return fail("the catalog has no spot offering of %s in zone %q", pc.InstanceType, pc.Zone)
	}
	if pc.PricePerHour, err = strconv.ParseFloat(strings.TrimSpace(record[3]), 64); err != nil || pc.PricePerHour <= 0 || math.IsInf(pc.PricePerHour, 0) {
		return fail("price %q: want dollars per hour above 0", record[3])
	}
	return pc, nil
}
