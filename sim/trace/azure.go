package trace

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Azure Public Dataset's VM table (vmtable.csv of AzurePublicDatasetV1,
// 2017, and V2, 2019) has no header and eleven columns: vmid,
// subscriptionid, deploymentid, vmcreated, vmdeleted (seconds from the
// trace's start), maxcpu, avgcpu, p95maxcpu, vmcategory (Interactive,
// Delay-insensitive, Unknown), vmcorecountbucket and vmmemorybucket (GB):
// buckets named by their upper end ("2", "4", "8", "24") or as "more than"
// (">24", ">64"). ReadAzureVMTable reads vmcreated, vmdeleted, vmcategory
// and the two buckets.
//
// Each VM is a replica of the service its category maps to, from its
// creation to its deletion. A row is written at each instant a service's
// VMs change: replicas the VMs then running, and each replica's cpu and
// memory their mean, so that a service's total demand is the trace's at
// every instant (each VM's own shape is averaged). A bucket is taken at
// its upper end; ">N" at azureOpenBucket times N.

// azureOpenBucket is what an open bucket (">24" cores, ">64" GB) counts
// as, a multiple of its lower end.
const azureOpenBucket = 1.5

// Azure VM table columns read.
const (
	azureCreated  = 3
	azureDeleted  = 4
	azureCategory = 8
	azureCores    = 9
	azureMemory   = 10
	azureColumns  = 11
)

// lifetime is one VM's or container's: from created to deleted (seconds
// from the trace's start), a replica of service asking for milliCPU and
// bytes.
type lifetime struct {
	created, deleted int64
	service          string
	milliCPU, bytes  int64
}

// serviceOf is the service a key (a category, an app) maps to; "*" maps
// every key not named.
func serviceOf(services map[string]string, key string) (string, bool) {
	if svc, ok := services[key]; ok {
		return svc, true
	}
	svc, ok := services["*"]
	return svc, ok
}

// ReadAzureVMTable reads a VM table, its time 0 at start; services maps a
// category (as the table writes it) to a spec service. A row that cannot
// be read, or whose category maps to no service, is refused by line.
func ReadAzureVMTable(r io.Reader, start time.Time, services map[string]string) (Trace, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var vms []lifetime
	err := eachRecord(cr, 1, "azure vm table", func(line int, record []string) error {
		vm, err := azureRow(line, record, services)
		if err == nil {
			vms = append(vms, vm)
		}
		return err
	})
	if err != nil {
		return Trace{}, err
	}
	if len(vms) == 0 {
		return Trace{}, errors.New("azure vm table: no VMs")
	}
	return Trace{Rows: rowsOf(vms, start)}, nil
}

func azureRow(line int, record []string, services map[string]string) (lifetime, error) {
	fail := func(format string, a ...any) (lifetime, error) {
		return lifetime{}, fmt.Errorf("line %d: "+format, append([]any{line}, a...)...)
	}
	if len(record) < azureColumns {
		return fail("%d columns, want %d (vmid, subscriptionid, deploymentid, vmcreated, vmdeleted, maxcpu, avgcpu, p95maxcpu, vmcategory, vmcorecountbucket, vmmemorybucket)", len(record), azureColumns)
	}
	created, err1 := strconv.ParseInt(strings.TrimSpace(record[azureCreated]), 10, 64)
	deleted, err2 := strconv.ParseInt(strings.TrimSpace(record[azureDeleted]), 10, 64)
	if err1 != nil || err2 != nil || created < 0 || deleted < created {
		return fail("vmcreated %q and vmdeleted %q: want seconds, created first", record[azureCreated], record[azureDeleted])
	}
	category := strings.TrimSpace(record[azureCategory])
	svc, ok := serviceOf(services, category)
	if !ok {
		return fail("vmcategory %q maps to no service", category)
	}
	cores, err := azureBucket(record[azureCores])
	if err != nil {
		return fail("vmcorecountbucket: %v", err)
	}
	gb, err := azureBucket(record[azureMemory])
	if err != nil {
		return fail("vmmemorybucket: %v", err)
	}
	return lifetime{created: created, deleted: deleted, service: svc, milliCPU: int64(cores * 1000), bytes: int64(gb * (1 << 30))}, nil
}

// azureBucket is a bucket's value: its upper end, or for ">N",
// azureOpenBucket times N.
func azureBucket(s string) (float64, error) {
	s = strings.TrimSpace(s)
	open := strings.HasPrefix(s, ">")
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, ">"), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a bucket (2, 4, >24)", s)
	}
	if open {
		v *= azureOpenBucket
	}
	return v, nil
}

// rowsOf turns lifetimes into a row per service and instant its replicas
// change: as many as are alive, each asking for their mean.
func rowsOf(vms []lifetime, start time.Time) []Row {
	type change struct {
		at      int64
		service string
		sign    int64
		vm      int
	}
	var changes []change
	for i, vm := range vms {
		changes = append(changes, change{vm.created, vm.service, 1, i}, change{vm.deleted, vm.service, -1, i})
	}
	slices.SortStableFunc(changes, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.service, b.service))
	})
	type total struct{ count, milliCPU, bytes int64 }
	totals := map[string]*total{}
	var rows []Row
	for i := 0; i < len(changes); {
		at, svc := changes[i].at, changes[i].service
		t := totals[svc]
		if t == nil {
			t = &total{}
			totals[svc] = t
		}
		for ; i < len(changes) && changes[i].at == at && changes[i].service == svc; i++ {
			vm := vms[changes[i].vm]
			t.count += changes[i].sign
			t.milliCPU += changes[i].sign * vm.milliCPU
			t.bytes += changes[i].sign * vm.bytes
		}
		row := Row{At: start.Add(time.Duration(at) * time.Second), Service: svc, Replicas: int(t.count)}
		if t.count > 0 {
			cpu, mem := ceilDiv(t.milliCPU, t.count), ceilDiv(t.bytes, t.count)
			row.Requests.MilliCPU, row.Requests.MemoryBytes = &cpu, &mem
		}
		rows = append(rows, row)
	}
	return rows
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
