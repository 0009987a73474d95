package trace

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var azureServices = map[string]string{"Interactive": "web", "Delay-insensitive": "batch"}

// The fixture (testdata/azure-vmtable.csv, made up in the dataset's
// format): a row per service at each instant its VMs change, replicas
// the VMs running, requests their mean.
func TestReadAzureVMTable(t *testing.T) {
	f, err := os.Open("testdata/azure-vmtable.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tr, err := ReadAzureVMTable(f, start, azureServices)
	if err != nil {
		t.Fatal(err)
	}
	const gib = 1 << 30
	want := []string{
		"0s web 2 3000m 6Gi",
		"5m0s batch 2 22000m 64Gi", // 8 and >24 (36) cores, 32 and >64 (96) GB
		"10m0s batch 1 8000m 32Gi",
		"10m0s web 2 3000m 6Gi", // one Interactive VM ended, another began
		"15m0s batch 0",
		"20m0s web 0",
	}
	var got []string
	for _, r := range tr.Rows {
		s := fmt.Sprintf("%s %s %d", r.At.Sub(start), r.Service, r.Replicas)
		if r.Requests.MilliCPU != nil {
			s += fmt.Sprintf(" %dm %dGi", *r.Requests.MilliCPU, *r.Requests.MemoryBytes/gib)
		}
		got = append(got, s)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestReadAzureVMTableRefusesBadRows(t *testing.T) {
	ok := "vm,s,d,0,300,1,1,1,Interactive,2,4\n"
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unmapped category", ok + "vm,s,d,0,300,1,1,1,Unknown,2,4\n", []string{"line 2", `vmcategory "Unknown" maps to no service`}},
		{"bad bucket", "vm,s,d,0,300,1,1,1,Interactive,two,4\n", []string{"line 1", "vmcorecountbucket", `"two"`}},
		{"deleted first", "vm,s,d,600,300,1,1,1,Interactive,2,4\n", []string{"line 1", "created first"}},
		{"short row", ok + "vm,s,d,0,300\n", []string{"line 2", "5 columns, want 11"}},
		{"empty", "", []string{"no VMs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadAzureVMTable(strings.NewReader(tc.in), time.Time{}, azureServices)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
