package agent

import (
	"context"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/runtime"
)

// serveLogRequests polls the server for `gantry logs` requests aimed at
// this machine and answers each by posting the replica's output, or, for
// an exec or a port-forward, with a stream of its own.
func (a *Agent) serveLogRequests(ctx context.Context) {
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, a.cfg.LogPollTimeout)
		reqs, err := a.pollClient().LogRequests(pollCtx, a.machineID)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				a.log.Debug("log request poll failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(a.cfg.RetryInterval):
			}
			continue
		}
		for _, req := range reqs {
			if req.Kind != "" {
				go a.serveStream(ctx, req)
				continue
			}
			go a.sendLogs(ctx, req)
		}
	}
}

// pollClient has no client-side timeout: the poll's context bounds it.
func (a *Agent) pollClient() *client.Client {
	return a.client.WithHTTPClient(&http.Client{Transport: a.transport})
}

// sendLogs streams one replica's output to the server in chunks: flushed
// every LogFlushInterval, with an empty chunk every LogKeepAlive so a
// followed stream learns when its reader has left.
func (a *Agent) sendLogs(ctx context.Context, req api.LogRequest) {
	reader, ok := a.driver.(runtime.LogReader)
	if !ok {
		a.sendLogChunk(ctx, req.ID, nil, false, "the "+a.driver.Name()+" runtime cannot read logs")
		return
	}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := reader.Logs(streamCtx, a.machineID, req.ReplicaID, runtime.LogOptions{Follow: req.Follow, Tail: req.Tail, Previous: req.Previous})
	if err != nil {
		a.sendLogChunk(ctx, req.ID, nil, false, err.Error())
		return
	}
	defer rc.Close()
	chunks := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := rc.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-streamCtx.Done():
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	flush := time.NewTicker(a.cfg.LogFlushInterval)
	defer flush.Stop()
	var pending []byte
	lastSent := time.Now()
	for {
		select {
		case data := <-chunks:
			pending = append(pending, data...)
			if len(pending) < 256<<10 {
				continue
			}
		case <-readErr:
			a.sendLogChunk(ctx, req.ID, pending, true, "")
			return
		case <-flush.C:
			if len(pending) == 0 && time.Since(lastSent) < a.cfg.LogKeepAlive {
				continue
			}
		case <-ctx.Done():
			return
		}
		if !a.sendLogChunk(ctx, req.ID, pending, false, "") {
			return
		}
		pending, lastSent = nil, time.Now()
	}
}

// sendLogChunk reports whether the reader is still there.
func (a *Agent) sendLogChunk(ctx context.Context, stream string, data []byte, eof bool, errMsg string) bool {
	err := a.client.SendLogChunk(ctx, a.machineID, stream, data, eof, errMsg)
	if err != nil && !client.IsStatus(err, http.StatusGone) {
		a.log.Debug("sending logs failed", "stream", stream, "err", err)
	}
	return err == nil
}
