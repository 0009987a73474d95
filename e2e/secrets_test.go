package e2e

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The values of the secret-leak scenario: each distinctive enough that a
// match anywhere is a leak.
const (
	leakDBPassword = "leak-check-db-9d1c47e2"
	leakOTLPToken  = "leak-check-otlp-5a08b3f6"
)

const secretSpec = `kind: Cluster
metadata: {name: sec}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 2, maxSize: 4}
  systemReserved: {cpu: 100m, memory: 128Mi}
  monitoring:
    otlpLogsEndpoint: http://127.0.0.1:1/v1/logs # nothing listens: the agents try, fail, and must not leak the header
    headers: [{name: Authorization, secretRef: {name: otlp, key: token}}]
---
kind: Service
metadata: {name: user}
spec:
  cluster: sec
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: USER_REPLICAS
  resources: {cpu: 300m, memory: 128Mi}
  env:
    - {name: DB_PASSWORD, secretRef: {name: db, key: password}}
---
kind: Service
metadata: {name: bystander}
spec:
  cluster: sec
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 2
  resources: {cpu: 300m, memory: 128Mi}
`

// leakScan collects every place a secret value must never be, and says
// where one is.
type leakScan struct {
	t       *testing.T
	places  map[string][]byte
	secrets []string
}

func (l *leakScan) add(place string, data []byte) {
	l.places[place] = append(l.places[place], data...)
}

func (l *leakScan) check() {
	l.t.Helper()
	for place, data := range l.places {
		for _, secret := range l.secrets {
			if bytes.Contains(data, []byte(secret)) {
				l.t.Errorf("the value of a Secret appears in %s", place)
			}
		}
	}
	l.t.Logf("scanned %d places for %d secret values", len(l.places), len(l.secrets))
}

// A full scenario — secrets created, apply, scale, logs, a rotation, a
// lost machine, errors on purpose — and then every log line, API answer,
// event, database byte, and the command line and environment of the
// server, the agents and the replicas that do not use the Secret are
// searched for the values: none holds them. The replicas that use the
// Secret do hold it in their environment (the search would find it).
func TestSecretValuesLeakNowhere(t *testing.T) {
	dir := t.TempDir()
	// A value only the server's environment holds (as its admin token,
	// encryption key or an environment-sourced Secret would be): no agent
	// may inherit it.
	serverOnly := "server-only-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("GANTRY_TEST_SERVER_ONLY", serverOnly)
	s := startServer(t, dir, "--local-exit-with-server")
	scan := &leakScan{t: t, places: map[string][]byte{}, secrets: []string{leakDBPassword, "rotated-" + leakDBPassword, leakOTLPToken}}
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		out, errOut, code := s.gantry(args...)
		scan.add("the output of gantry "+args[0], []byte(out+errOut))
		if code != wantCode {
			t.Fatalf("gantry %v: exit %d, want %d: %s%s", args, code, wantCode, out, errOut)
		}
		return out + errOut
	}
	secretFile := func(name, value string) string { return writeFile(t, t.TempDir(), name, value) }

	cli(0, "secret", "create", "db", "--from-file", "password="+secretFile("pw", leakDBPassword))
	cli(0, "secret", "create", "otlp", "--from-file", "token="+secretFile("token", leakOTLPToken))
	apply := func(userReplicas int) {
		spec := strings.ReplaceAll(secretSpec, "USER_REPLICAS", strconv.Itoa(userReplicas))
		cli(0, "apply", "-f", writeFile(t, dir, "secrets.yaml", spec))
	}
	apply(1)
	waitFor(t, "replicas answering", func() (bool, string) {
		if ok, why := allAnswer(s.replicas("user"), 1); !ok {
			return false, why
		}
		return allAnswer(s.replicas("bystander"), 2)
	})
	apply(2) // scale
	waitFor(t, "the scaled service answering", func() (bool, string) { return allAnswer(s.replicas("user"), 2) })
	userReplica := s.replicas("user")[0]
	cli(0, "logs", userReplica.ID)

	// Errors on purpose: none may echo a value.
	cli(1, "secret", "create", "db", "--from-file", "password="+secretFile("pw", leakDBPassword))
	cli(1, "secret", "delete", "db")
	cli(1, "secret", "create", "db", "--overwrite", "--from-file", "other="+secretFile("pw", leakDBPassword))
	cli(1, "apply", "-f", writeFile(t, dir, "bad.yaml", strings.Replace(strings.ReplaceAll(secretSpec, "USER_REPLICAS", "2"), "key: password", "key: passwd", 1)))

	// A rotation rolls the replicas that use the Secret.
	cli(0, "secret", "create", "db", "--overwrite", "--from-file", "password="+secretFile("pw", "rotated-"+leakDBPassword))
	waitFor(t, "the rotated value in the user replicas", func() (bool, string) {
		for _, pid := range pidsOfService(dir, "user") {
			if !bytes.Contains(environOf(pid), []byte("DB_PASSWORD=rotated-"+leakDBPassword)) {
				return false, fmt.Sprintf("pid %d still has the old value", pid)
			}
		}
		return len(pidsOfService(dir, "user")) == 2, fmt.Sprintf("%d user replicas run", len(pidsOfService(dir, "user")))
	})

	// A lost machine: its replicas move, with their secrets.
	victim := busiestMachine(s.replicas("bystander"))
	if err := syscall.Kill(-instanceOf(t, dir, victim).PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replicas off the lost machine", func() (bool, string) {
		for _, svc := range []string{"user", "bystander"} {
			for _, r := range s.replicas(svc) {
				if r.Machine == victim {
					return false, r.ID + " still on " + victim
				}
			}
		}
		if ok, why := allAnswer(s.replicas("user"), 2); !ok {
			return false, why
		}
		return allAnswer(s.replicas("bystander"), 2)
	})

	scanAPI(t, s, scan)
	scanProcess(scan, "the server", s.cmd.Process.Pid)
	agents := 0
	for _, inst := range localInstances(dir) {
		if inst.PID > 0 && processAlive(inst.PID, inst.ID) {
			scanProcess(scan, "agent "+inst.ID, inst.PID)
			agents++
			if env := environOf(inst.PID); bytes.Contains(env, []byte(serverOnly)) || !bytes.Contains(env, []byte("PATH=")) {
				t.Errorf("agent %s: its environment holds the server's own variables, or lacks PATH: %q", inst.ID, env)
			}
		}
	}
	if agents == 0 {
		t.Fatal("no agent process found: the scan of agents would look at nothing")
	}
	for _, pid := range pidsOfService(dir, "bystander") {
		scanProcess(scan, "a bystander replica", pid)
	}
	users := pidsOfService(dir, "user")
	if len(users) == 0 {
		t.Fatal("no user replica process found: the scan would look at nothing")
	}
	for _, pid := range users {
		if !bytes.Contains(environOf(pid), []byte("DB_PASSWORD=rotated-"+leakDBPassword)) {
			t.Errorf("user replica pid %d lacks its secret value", pid)
		}
	}
	s.kill() // its log is whole once it has exited
	scan.add("the server log", s.log.Bytes())
	scanFiles(t, dir, scan)
	scan.check()
}

// scanAPI reads every API answer an operator can get.
func scanAPI(t *testing.T, s *server, scan *leakScan) {
	t.Helper()
	httpClient := trustingClient(s.dataDir, 10*time.Second)
	paths := []string{"/healthz", "/metrics", "/v1/openapi.json", "/v1/clusters", "/v1/clusters/sec", "/v1/services",
		"/v1/services/user", "/v1/services/bystander", "/v1/machines", "/v1/replicas", "/v1/events?limit=1000",
		"/v1/events?kind=Audit&limit=1000", "/v1/secrets", "/v1/secrets/db", "/v1/secrets/otlp", "/v1/tokens"}
	for _, m := range s.machines() {
		paths = append(paths, "/v1/machines/"+m.ID)
	}
	for _, svc := range []string{"user", "bystander"} {
		for _, r := range s.replicas(svc) {
			paths = append(paths, "/v1/replicas/"+r.ID)
		}
	}
	for _, p := range paths {
		req, _ := http.NewRequest(http.MethodGet, s.url+p, nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", p, resp.Status)
		}
		scan.add("GET "+p, body)
	}
	for _, kind := range []string{"clusters", "services", "machines", "replicas", "events", "secrets"} {
		out, errOut, _ := s.gantry("get", kind, "-o", "json")
		scan.add("gantry get "+kind, []byte(out+errOut))
	}
}

// scanFiles reads every file of the server's data dir: the database, the
// agents' and replicas' logs. The agents' credential files are left out:
// they hold the monitoring header values the agent exports with (0600,
// like the credential beside them).
func scanFiles(t *testing.T, dir string, scan *leakScan) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "credential.json" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil // a file that went away while we walked
		}
		scan.add("file "+strings.TrimPrefix(path, dir), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := scan.places["file /gantry.db"]; !ok {
		t.Fatal("the database was not among the files scanned")
	}
}

func scanProcess(scan *leakScan, who string, pid int) {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	scan.add("the command line of "+who, cmdline)
	scan.add("the environment of "+who, environOf(pid))
}

func environOf(pid int) []byte {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return data
}

// pidsOfService finds the replica processes of a service by the
// GANTRY_SERVICE variable every replica has, among the children of this
// test's agents only (other tests on the host may run a "user").
func pidsOfService(dataDir, service string) []int {
	agents := map[int]bool{}
	for _, inst := range localInstances(dataDir) {
		if inst.PID > 0 {
			agents[inst.PID] = true
		}
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !agents[parentOf(pid)] {
			continue
		}
		for _, kv := range bytes.Split(environOf(pid), []byte{0}) {
			if string(kv) == "GANTRY_SERVICE="+service {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// parentOf reads a process's parent id from /proc (0 when gone).
func parentOf(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields start after it.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}
