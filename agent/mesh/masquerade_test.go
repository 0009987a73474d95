package mesh

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/internal/testnet"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
)

// The rule is made in a namespace of the test's own; nft, run there,
// reads it back as the kernel holds it. Made again it replaces itself,
// and close removes it.
func TestMasqueradeRuleIsMadeAndRemoved(t *testing.T) {
	testnet.Require(t, true)
	name := fmt.Sprintf("gmq%d", os.Getpid()%100000)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	subnet, cluster := netip.MustParsePrefix("10.244.3.0/24"), netip.MustParsePrefix("10.244.0.0/16")
	for range 2 {
		if _, err := masquerade(subnet, cluster, nftables.WithNetNSFd(int(ns))); err != nil {
			t.Fatal(err)
		}
	}
	closeRule, err := masquerade(subnet, cluster, nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: masqueradeTable}
	rules, err := conn.GetRules(table, &nftables.Chain{Name: "postrouting", Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 {
		t.Fatalf("%d rules in %s, want 1 (made again, it replaces itself)", len(rules), masqueradeTable)
	}
	var got []string
	for _, e := range rules[0].Exprs {
		switch e := e.(type) {
		case *expr.Cmp:
			got = append(got, fmt.Sprintf("cmp %d %v", e.Op, net.IP(e.Data)))
		case *expr.Bitwise:
			got = append(got, fmt.Sprintf("mask %v", net.IP(e.Mask)))
		case *expr.Payload:
			got = append(got, fmt.Sprintf("load %d", e.Offset))
		case *expr.Masq:
			got = append(got, "masq")
		}
	}
	want := "load 12|mask 255.255.255.0|cmp 0 10.244.3.0|load 16|mask 255.255.0.0|cmp 1 10.244.0.0|masq"
	if strings.Join(got, "|") != want {
		t.Fatalf("rule %s, want %s (ip saddr 10.244.3.0/24 ip daddr != 10.244.0.0/16 masquerade)", strings.Join(got, "|"), want)
	}
	if err := closeRule(); err != nil {
		t.Fatal(err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == masqueradeTable {
			t.Fatalf("table %s left after close", masqueradeTable)
		}
	}
}
