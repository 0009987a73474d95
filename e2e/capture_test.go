package e2e

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// capture counts the frames crossing a host interface (a bridge, made
// promiscuous so it hands up what it forwards between its ports): the
// WireGuard datagrams, and the frames that carry a marker in clear.
type capture struct {
	fd   int
	port uint16
	done chan struct{}

	mu                   sync.Mutex
	wireguard, cleartext int
}

// startCapture starts counting on ifname; WireGuard is UDP to or from port.
func startCapture(t *testing.T, ifname string, port uint16, marker []byte) *capture {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	all := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, all)
	if err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		t.Fatalf("bind to %s: %v", ifname, err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		t.Fatalf("promiscuous %s: %v", ifname, err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	c := &capture{fd: fd, port: port, done: make(chan struct{})}
	go c.read(marker)
	return c
}

func (c *capture) read(marker []byte) {
	defer close(c.done)
	buf := make([]byte, 65536)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return // closed
		}
		frame := buf[:n]
		c.mu.Lock()
		if bytes.Contains(frame, marker) {
			c.cleartext++
		}
		if c.isWireGuard(frame) {
			c.wireguard++
		}
		c.mu.Unlock()
	}
}

// isWireGuard: an IPv4 UDP datagram to or from the WireGuard port.
func (c *capture) isWireGuard(frame []byte) bool {
	if len(frame) < 14+20+8 || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_IP || frame[14+9] != unix.IPPROTO_UDP {
		return false
	}
	udp := frame[14+int(frame[14]&0x0f)*4:]
	return len(udp) >= 4 && (binary.BigEndian.Uint16(udp[0:2]) == c.port || binary.BigEndian.Uint16(udp[2:4]) == c.port)
}

// stop ends the capture and returns its counts.
func (c *capture) stop() (wireguard, cleartext int) {
	unix.Close(c.fd)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wireguard, c.cleartext
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
