package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/leader"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// A second server on a data dir refuses to start, and leaves the first
// one's files as they were.
func TestSecondServerOnADataDirIsRefused(t *testing.T) {
	ts := startServer(t, nil)
	urlFile := filepath.Join(ts.cfg.DataDir, "server.url")
	before, _ := os.ReadFile(urlFile)
	cfg := DefaultConfig(ts.cfg.DataDir)
	cfg.Listen = "127.0.0.1:0"
	_, err := New(context.Background(), cfg, ts.log)
	if err == nil || !strings.Contains(err.Error(), "in use by another gantry server") {
		t.Fatalf("second server on %s: %v", ts.cfg.DataDir, err)
	}
	if after, _ := os.ReadFile(urlFile); string(after) != string(before) {
		t.Fatalf("server.url rewritten by the refused server: %q → %q", before, after)
	}
}

// The database and the server's files are 0600 even in a data dir that
// others may read.
func TestDataFilesAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config) {
		c.DataDir = dir
		c.Store.SQLite = DefaultConfig(dir).Store.SQLite
	})
	for _, name := range []string{"gantry.db", "gantry.db-wal", "admin-token", "encryption-key", "server.url", "server.lock", "ca.crt", "tls/server.crt", "tls/server.key"} {
		info, err := os.Stat(filepath.Join(ts.cfg.DataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, info.Mode().Perm())
		}
	}
}

var sharedKey = auth.NewEncryptionKey()

var fastLease = leader.Config{LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}

// Servers sharing one PostgreSQL database: each serves the API, exactly
// one leads, and another leads once it stops.
func TestServersOnPostgresShareOneLeader(t *testing.T) {
	url := pgtest.URL(t)
	onPostgres := func(name string) func(*Config) {
		return func(c *Config) {
			c.Store.URL, c.Leader, c.Name = url, fastLease, name
			c.AdminToken, c.EncryptionKey = "shared-admin-token", sharedKey
		}
	}
	a := startServer(t, onPostgres("a"))
	b := startServer(t, onPostgres("b"))
	waitFor(t, 5*time.Second, "one leader", func() bool { return a.Leading() != b.Leading() })
	lead, follow := a, b
	if b.Leading() {
		lead, follow = b, a
	}
	ctx := context.Background()
	if _, err := follow.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatalf("apply through the follower: %v", err)
	}
	got, err := lead.admin.ListClusters(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("the leader reads what the follower wrote: %v %v", got, err)
	}
	lead.stopNow(t)
	// A liveness check, not a timing one: a host loaded by a 50,000-machine
	// benchmark once took over two leases.
	waitFor(t, 10*fastLease.LeaseDuration, "the follower to lead", follow.Leading)
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// `gantry logs` asked of one server reaches an agent that polls another:
// the first passes the request to the second.
func TestLogsAreRelayedToTheAgentsServer(t *testing.T) {
	url := pgtest.URL(t)
	onPostgres := func(name string) func(*Config) {
		return func(c *Config) {
			c.Store.URL, c.Leader, c.Name, c.AdminToken, c.EncryptionKey = url, fastLease, name, "shared-admin-token", sharedKey
		}
	}
	a := startServer(t, onPostgres("a"))
	b := startServer(t, onPostgres("b"))
	ctx := context.Background()
	if _, err := a.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	credential := a.joinManual(t, "dev", "m1")
	// A replica the leader keeps (one it made up by hand would be deleted
	// by its next pass): the only machine takes it.
	if _, err := a.admin.Apply(ctx, []byte("kind: Service\nmetadata: {name: web}\nspec: {cluster: dev, command: [sleep, \"60\"]}\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "web-0 placed on m1", func() bool {
		r, err := a.admin.GetReplica(ctx, "web-0")
		return err == nil && r.Machine == "m1"
	})
	agent := client.New(b.URL(), credential, b.http)
	served := make(chan error, 1)
	go func() {
		for {
			reqs, err := agent.LogRequests(ctx, "m1")
			if err != nil {
				served <- err
				return
			}
			for _, req := range reqs {
				served <- agent.SendLogChunk(ctx, "m1", req.ID, []byte("hello from m1\n"), true, "")
				return
			}
		}
	}()
	awaitPoll(t, b.logs, "m1")
	rc, err := a.admin.Logs(ctx, "web-0", client.LogOptions{Tail: -1})
	if err != nil {
		t.Fatalf("logs through a, agent on b: %v", err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	if string(data) != "hello from m1\n" {
		t.Fatalf("relayed logs: %q", data)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// An unauthenticated client that sends a join header and then no body is
// cut off once the read timeout passes, instead of holding a connection.
func TestSlowBodyIsCutOff(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	conn, err := tls.Dial("tcp", strings.TrimPrefix(ts.URL(), "https://"), ts.http.Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /v1/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1024)
	for {
		if _, err := conn.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server still holds the connection after 30 s")
			}
			return // closed by the server (after answering the read error, if it did)
		}
	}
}

// The join-signing key is sealed in the store: the database alone does
// not give it away; a server with another encryption key refuses to start
// on it, saying why.
func TestServerSecretsAreSealed(t *testing.T) {
	ts := startServer(t, nil)
	var stored string
	if err := ts.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		stored, err = tx.GetMeta("join-signing-key")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !auth.IsSealed(stored) {
		t.Fatalf("the join-signing key is stored in plain: %q", stored)
	}
	dir := ts.cfg.DataDir
	ts.stopNow(t)
	ts.Close()
	cfg := DefaultConfig(dir)
	cfg.Listen, cfg.EncryptionKey = "127.0.0.1:0", auth.NewEncryptionKey()
	_, err := New(context.Background(), cfg, ts.log)
	if err == nil || !strings.Contains(err.Error(), "same encryption key") {
		t.Fatalf("a server with another key: %v", err)
	}
}
