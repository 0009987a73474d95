package mesh

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// masqueradeTable is the nftables table (family ip) that holds the rule;
// one per network namespace, the machine's.
const masqueradeTable = "gantry-nat"

// Masquerade lets the replicas at addresses of the machine's /24 reach
// addresses outside the cluster: what they send beyond the cluster's
// containerCidr leaves with the machine's own address on the way out
// (nftables: ip saddr SUBNET ip daddr != CLUSTER masquerade), as the CNI
// bridge plugin's ipMasq does. Traffic within the cluster keeps its
// source. It replaces the table of an earlier run; close removes it.
func Masquerade(subnet, cluster netip.Prefix) (close func() error, err error) {
	return masquerade(subnet, cluster)
}

// masquerade is Masquerade in the namespace opts name (the caller's by
// default).
func masquerade(subnet, cluster netip.Prefix, opts ...nftables.ConnOption) (func() error, error) {
	if !subnet.Addr().Is4() || !cluster.Addr().Is4() {
		return nil, fmt.Errorf("masquerade %s beyond %s: only IPv4", subnet, cluster)
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: masqueradeTable}
	conn.AddTable(table)
	conn.DelTable(table) // what an earlier run left
	conn.AddTable(table)
	chain := conn.AddChain(&nftables.Chain{Name: "postrouting", Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	var exprs []expr.Any
	exprs = append(exprs, matchPrefix(12, subnet.Masked(), expr.CmpOpEq)...)   // source
	exprs = append(exprs, matchPrefix(16, cluster.Masked(), expr.CmpOpNeq)...) // destination
	exprs = append(exprs, &expr.Masq{})
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	if err := conn.Flush(); err != nil {
		return nil, fmt.Errorf("masquerade %s beyond %s (nftables, needs CAP_NET_ADMIN): %w", subnet, cluster, err)
	}
	return func() error {
		conn.DelTable(table)
		return conn.Flush()
	}, nil
}

// matchPrefix compares the IPv4 address at offset of the network header,
// masked to p's bits, with p's address.
func matchPrefix(offset uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
	addr := p.Addr().As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: net.CIDRMask(p.Bits(), 32), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: addr[:]},
	}
}
