package client

import (
	"slices"
	"sync"
)

// servers is the client's list of server URLs, the one that last
// answered first.
type servers struct {
	mu   sync.Mutex
	urls []string
}

func newServers(urls []string) *servers { return &servers{urls: urls} }

func (s *servers) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.urls)
}

func (s *servers) prefer(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.urls, url); i > 0 {
		s.urls = append([]string{url}, slices.Delete(slices.Clone(s.urls), i, i+1)...)
	}
}

func (s *servers) set(urls []string) {
	if len(urls) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := slices.Clone(urls)
	if len(s.urls) > 0 {
		if i := slices.Index(next, s.urls[0]); i > 0 {
			next = append([]string{s.urls[0]}, slices.Delete(next, i, i+1)...)
		}
	}
	s.urls = next
}
