package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Alibaba cluster-trace-v2018's container_meta.csv: no header, eight
// columns (container_id, machine_id, time_stamp, app_du, status,
// cpu_request, cpu_limit, mem_size); a row is a container seen at a time
// stamp, in seconds. cpu_request counts 100 to a core; mem_size is
// normalised to [0, 100], so the memory that 100 stands for is the
// caller's to say.
const (
	alibabaContainer = 0
	alibabaTime      = 2
	alibabaApp       = 3
	alibabaCPU       = 5
	alibabaMemory    = 7
	alibabaColumns   = 8
)

// alibabaSeen is what the rows of one container say.
type alibabaSeen struct {
	first, last int64
	service     string
	milliCPU    int64
	bytes       int64
}

// ReadAlibabaContainers reads a container_meta table, its second 0 at
// start; services maps an app_du to a spec service ("*": every app not
// named); memoryFull is the memory a mem_size of 100 stands for. Each
// container is a replica of its app's service from its first row to its
// last, asking for what its last row says; a container seen at one time
// stamp only runs until the table's last. A row that cannot be read, or
// whose app maps to no service, is refused by line.
func ReadAlibabaContainers(r io.Reader, start time.Time, services map[string]string, memoryFull int64) (Trace, error) {
	if memoryFull <= 0 {
		return Trace{}, errors.New("alibaba container table: the memory a mem_size of 100 stands for must be set")
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	seen := map[string]*alibabaSeen{}
	err := eachRecord(cr, 1, "alibaba container table", func(line int, record []string) error {
		return alibabaRow(line, record, services, memoryFull, seen)
	})
	if err != nil {
		return Trace{}, err
	}
	end := int64(0)
	if len(seen) == 0 {
		return Trace{}, errors.New("alibaba container table: no containers")
	}
	ids := make([]string, 0, len(seen))
	for id, c := range seen {
		ids = append(ids, id)
		end = max(end, c.last)
	}
	sort.Strings(ids)
	lives := make([]lifetime, 0, len(ids))
	for _, id := range ids {
		c := seen[id]
		last := c.last
		if last == c.first {
			last = end
		}
		if last > c.first {
			lives = append(lives, lifetime{created: c.first, deleted: last, service: c.service, milliCPU: c.milliCPU, bytes: c.bytes})
		}
	}
	if len(lives) == 0 {
		return Trace{}, errors.New("alibaba container table: every container is seen at the table's last time stamp only")
	}
	return Trace{Rows: rowsOf(lives, start)}, nil
}

func alibabaRow(line int, record []string, services map[string]string, memoryFull int64, seen map[string]*alibabaSeen) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("line %d: "+format, append([]any{line}, a...)...)
	}
	if len(record) < alibabaColumns {
		return fail("%d columns, want %d (container_id, machine_id, time_stamp, app_du, status, cpu_request, cpu_limit, mem_size)", len(record), alibabaColumns)
	}
	id := strings.TrimSpace(record[alibabaContainer])
	if id == "" {
		return fail("container_id is empty")
	}
	at, err := strconv.ParseInt(strings.TrimSpace(record[alibabaTime]), 10, 64)
	if err != nil || at < 0 {
		return fail("time_stamp %q: want seconds", record[alibabaTime])
	}
	app := strings.TrimSpace(record[alibabaApp])
	svc, ok := serviceOf(services, app)
	if !ok {
		return fail("app_du %q maps to no service", app)
	}
	cpu, err := strconv.ParseInt(strings.TrimSpace(record[alibabaCPU]), 10, 64)
	if err != nil || cpu < 0 {
		return fail("cpu_request %q: want 100 to a core", record[alibabaCPU])
	}
	mem, err := strconv.ParseFloat(strings.TrimSpace(record[alibabaMemory]), 64)
	if err != nil || mem < 0 || mem > 100 || math.IsNaN(mem) {
		return fail("mem_size %q: want a share of 100", record[alibabaMemory])
	}
	bytes := int64(math.Ceil(mem / 100 * float64(memoryFull)))
	c := seen[id]
	if c == nil {
		seen[id] = &alibabaSeen{first: at, last: at, service: svc, milliCPU: cpu * 10, bytes: bytes}
		return nil
	}
	if c.service != svc {
		return fail("container %s changes app, from service %s to %s", id, c.service, svc)
	}
	c.first = min(c.first, at)
	if at >= c.last {
		c.last, c.milliCPU, c.bytes = at, cpu*10, bytes
	}
	return nil
}
