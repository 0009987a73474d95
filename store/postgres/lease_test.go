package postgres

import (
	"context"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// slowProxy forwards connections to the database of dbURL, holding each
// new connection's first answer back by delay (a loaded database that
// forks and authenticates backends slowly), and returns its URL.
func slowProxy(t *testing.T, dbURL string, delay time.Duration) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	target := u.Host
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				server, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer server.Close()
				go func() { _, _ = io.Copy(server, client) }()
				time.Sleep(delay)
				_, _ = io.Copy(client, server)
			}()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

// A lease call is as short as the elector's retry period. When opening a
// connection takes longer, a call that had to open one never succeeded
// (each attempt cancelled its own connection) and no follower could take
// the lease over; the lease pool's connection is now opened apart from
// the calls, within ConnectTimeout.
func TestLeaseCallsSucceedWhenConnectingTakesLongerThanACall(t *testing.T) {
	slow := slowProxy(t, pgtest.URL(t), 400*time.Millisecond)
	for _, warm := range []bool{false, true} {
		cfg := DefaultConfig(slow)
		if !warm {
			cfg.LeaseWarmInterval = 0
		}
		s, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		name := map[bool]string{false: "cold", true: "warm"}[warm]
		acquired := false
		for deadline := time.Now().Add(3 * time.Second); !acquired && time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			_, err = s.AcquireLease(ctx, name, "s1", time.Minute)
			cancel()
			acquired = err == nil
		}
		s.Close()
		if acquired != warm {
			t.Errorf("lease pool warmed %v: acquired within 150 ms calls %v (last error %v)", warm, acquired, err)
		}
	}
}
