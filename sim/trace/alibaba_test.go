package trace

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The fixture, in container_meta.csv's format: each container a replica
// of its app's service from its first row to its last (c_4, seen once,
// until the table's end), each service's rows its containers alive and
// their mean requests.
func TestAlibabaContainers(t *testing.T) {
	f, err := os.Open("testdata/alibaba-container-meta.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr, err := ReadAlibabaContainers(f, start, map[string]string{"app_1": "web", "*": "batch"}, 100<<30)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range tr.Rows {
		s := fmt.Sprintf("%d %s %d", int(r.At.Sub(start).Seconds()), r.Service, r.Replicas)
		if r.Requests.MilliCPU != nil {
			s += fmt.Sprintf(" %dm %dMi", *r.Requests.MilliCPU, *r.Requests.MemoryBytes>>20)
		}
		got = append(got, s)
	}
	want := []string{
		"0 web 1 4000m 3205Mi",
		"300 batch 1 8000m 6400Mi",
		"300 web 2 3000m 2401Mi",
		"600 batch 2 4500m 3599Mi",
		"600 web 1 2000m 1597Mi",
		"900 web 0",
		"1200 batch 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Bad rows are refused by line, every one.
func TestAlibabaRefusesBadRows(t *testing.T) {
	table := "c_1,m_1,0,app_1,started,400,400,3.13\n" +
		"c_2,m_1,x,app_1,started,400,400,3.13\n" +
		"c_3,m_1,0,app_9,started,400,400,3.13\n" +
		"c_4,m_1,0,app_1,started,400,400,130\n" +
		"c_5,m_1,0,app_1\n"
	_, err := ReadAlibabaContainers(strings.NewReader(table), time.Now(), map[string]string{"app_1": "web"}, 1<<30)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"line 2: time_stamp", "line 3: app_du \"app_9\"", "line 4: mem_size", "line 5: 4 columns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if _, err := ReadAlibabaContainers(strings.NewReader(table), time.Now(), map[string]string{"*": "web"}, 0); err == nil || !strings.Contains(err.Error(), "mem_size of 100") {
		t.Errorf("no memory scale: %v", err)
	}
}
