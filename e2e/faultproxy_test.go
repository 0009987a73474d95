package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// pidProxy forwards TCP to a server, and can cut everyone (a network
// partition) or the connections of chosen processes (an agent partitioned
// from the servers) while serving everyone else: which process a loopback
// connection comes from is told by the socket's inode (/proc/net/tcp)
// among the process's descriptors.
type pidProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	conns   map[net.Conn]connInfo
	blocked map[int]bool
	all     bool
}

type connInfo struct {
	inode    string
	upstream net.Conn
}

func startPIDProxy(t *testing.T, target string) *pidProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pidProxy{ln: ln, target: target, conns: map[net.Conn]connInfo{}, blocked: map[int]bool{}}
	t.Cleanup(func() { ln.Close(); p.cutAll() })
	go p.serve()
	return p
}

func (p *pidProxy) addr() string { return p.ln.Addr().String() }

func (p *pidProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		inode := clientInode(c)
		p.mu.Lock()
		if p.all || p.ownedByBlocked(inode) {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = connInfo{inode: inode, upstream: up}
		p.mu.Unlock()
		go func() {
			_, _ = io.Copy(up, c)
			up.Close()
		}()
		go func() {
			_, _ = io.Copy(c, up)
			c.Close()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

// cut partitions pid from the server: its connections close, new ones
// are refused, until heal.
func (p *pidProxy) cut(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[pid] = true
	owned := socketInodes(pid)
	p.closeWhere(func(info connInfo) bool { return owned[info.inode] })
}

// cutAll closes every connection and refuses new ones, until heal.
func (p *pidProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = true
	p.closeWhere(func(connInfo) bool { return true })
}

// closeWhere closes the connections match picks. Callers hold p.mu.
func (p *pidProxy) closeWhere(match func(connInfo) bool) {
	for c, info := range p.conns {
		if match(info) {
			c.Close()
			info.upstream.Close()
			delete(p.conns, c)
		}
	}
}

func (p *pidProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked, p.all = map[int]bool{}, false
}

// ownedByBlocked: callers hold p.mu.
func (p *pidProxy) ownedByBlocked(inode string) bool {
	for pid := range p.blocked {
		if socketInodes(pid)[inode] {
			return true
		}
	}
	return false
}

// clientInode is the inode of the client's end of an accepted loopback
// connection.
func clientInode(c net.Conn) string {
	client, _ := c.RemoteAddr().(*net.TCPAddr)
	server, _ := c.LocalAddr().(*net.TCPAddr)
	if client == nil || server == nil {
		return ""
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	local, remote := fmt.Sprintf(":%04X", client.Port), fmt.Sprintf(":%04X", server.Port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && strings.HasSuffix(fields[1], local) && strings.HasSuffix(fields[2], remote) {
			return fields[9]
		}
	}
	return ""
}

// socketInodes are the inodes of a process's sockets.
func socketInodes(pid int) map[string]bool {
	out := map[string]bool{}
	fds, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fd", "*"))
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && strings.HasPrefix(link, "socket:[") {
			out[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	return out
}
