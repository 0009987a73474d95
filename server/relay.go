package server

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/gantry-dev/gantry/store"
)

// Log relay across servers: an agent long-polls for log requests on the
// server it talks to, and that server records itself as the machine's
// log server. `gantry logs` asked of another server is passed on to it.

// relayedHeader marks a request one server passed to another: it is
// never passed on again.
const relayedHeader = "X-Gantry-Relayed"

func logServerKey(machine string) string { return "log-server/" + machine }

// recordLogServer notes that machine's agent polls this server, when the
// store does not say so already.
func (s *Server) recordLogServer(r *http.Request, machine string) {
	key := logServerKey(machine)
	var current string
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		current, err = tx.GetMeta(key)
		return err
	})
	if err == nil && current == s.advertise {
		return
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("read log server", "machine", machine, "err", err)
		return
	}
	if err := s.store.Update(r.Context(), func(tx store.Tx) error { return tx.PutMeta(key, s.advertise) }); err != nil {
		s.log.Warn("record log server", "machine", machine, "err", err)
	}
}

// relayLogs passes a logs request to the server machine's agent polls,
// and reports whether it did. A request is served here when the agent
// polls here, when it was relayed already, or when no other server is
// known.
func (s *Server) relayLogs(w http.ResponseWriter, r *http.Request, machine string) bool {
	if polling, _ := s.logs.Polling(machine); polling || r.Header.Get(relayedHeader) != "" {
		return false
	}
	var target string
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		target, err = tx.GetMeta(logServerKey(machine))
		return err
	})
	if err != nil || target == "" || target == s.advertise {
		return false
	}
	u, err := url.Parse(target)
	if err != nil {
		return false
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header.Set(relayedHeader, s.advertise)
		},
		Transport:     s.peerTransport(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeError(w, r, errorf(http.StatusBadGateway, "relay-failed", "", "the logs of machine %s are relayed by the server at %s, which did not answer: %v", machine, target, err))
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}
