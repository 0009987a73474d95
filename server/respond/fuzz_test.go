package respond_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/server/respond"
)

// FuzzDecodeRequests: no body makes the server's request decoder panic,
// and a body it accepts round-trips through JSON, for every JSON request
// type of the API (join, heartbeat, join token, drain, token, secret,
// scale, undo). It lives beside the decoder, not in package server, so a
// fuzz run instruments a small build rather than the whole server's.
func FuzzDecodeRequests(f *testing.F) {
	bodies := respond.Bodies{MaxBytes: 1 << 20, ReadTimeout: time.Second}
	for _, seed := range []string{`{}`, `{"token":"x","cluster":"dev","inventory":{"capacity":{"milliCpu":1000}}}`,
		`{"replicas":[{"replicaId":"r","state":"running","hostPorts":{"http":1}}]}`, `{"cluster":"dev","group":"g","ttl":"1h"}`,
		`{"deadline":"10s"}`, `{"kind":"join","cluster":"dev","group":"g","maxUses":-1}`, `{"name":"db","data":{"password":"x"}}`,
		`{"replicas":3}`, `{"toRevision":2}`, `[]`, `{"a":1}`, `{"token":1}`, `{} {}`} {
		for kind := range 8 {
			f.Add(uint8(kind), seed)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body string) {
		targets := []any{&api.JoinRequest{}, &api.HeartbeatRequest{}, &api.JoinTokenRequest{}, &api.DrainRequest{}, &api.TokenRequest{}, &api.SecretRequest{},
			&api.ScaleRequest{}, &api.RolloutUndo{}}
		into := targets[int(kind)%len(targets)]
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		if err := bodies.Decode(httptest.NewRecorder(), r, into); err != nil {
			if _, ok := err.(*respond.Error); !ok {
				t.Fatalf("decode error of an unexpected kind %T: %v", err, err)
			}
			return
		}
		if _, err := json.Marshal(into); err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", body, err)
		}
	})
}
