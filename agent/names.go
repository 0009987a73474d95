package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/agent/names"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
)

// DNSEnv tells a replica where its machine's agent answers the cluster's
// names (host:port).
const DNSEnv = "GANTRY_DNS"

// dnsAddressFile keeps the address the DNS server listened on, so that a
// restarted agent answers at the same one (replicas that outlive it keep
// theirs) and reports its inventory again only when it moved.
const dnsAddressFile = "dns-address"

// startDNS starts the DNS server, at the address of the last run when it
// is free; a server that cannot listen is logged, and the agent runs on
// without one.
func (a *Agent) startDNS(ctx context.Context) error {
	if a.cfg.DNS.Listen == "" {
		a.inventorySent = true
		return nil
	}
	if err := a.resolveDNSListen(); err != nil {
		a.log.Error("cannot answer the cluster's names", "err", err)
		a.inventorySent = true
		return nil
	}
	path := filepath.Join(a.cfg.DataDir, dnsAddressFile)
	last, _ := os.ReadFile(path)
	prev := strings.TrimSpace(string(last))
	var srv *names.Server
	if prev != "" && strings.HasSuffix(a.cfg.DNS.Listen, ":0") {
		cfg := a.cfg.DNS
		cfg.Listen = prev
		srv = names.New(cfg, a.log)
		if err := srv.Start(ctx); err != nil {
			a.log.Info("the last run's DNS address is taken; listening on another", "address", prev, "err", err)
			srv = nil
		}
	}
	if srv == nil {
		srv = names.New(a.cfg.DNS, a.log)
		if err := srv.Start(ctx); err != nil {
			// Names are not worth the machine: it runs its replicas without.
			a.log.Error("cannot answer the cluster's names", "err", err)
			a.inventorySent = true
			return nil
		}
	}
	a.dns = srv
	a.inventorySent = srv.Addr() == prev
	if srv.Addr() != prev {
		if err := os.WriteFile(path, []byte(srv.Addr()+"\n"), 0o600); err != nil {
			a.log.Warn("keep the DNS address", "err", err)
		}
	}
	a.log.Info("answering the cluster's names", "dns", srv.Addr())
	a.answerContainers(ctx)
	return nil
}

// resolveDNSListen puts the address this machine reaches the server from
// in place of a listen host of MeshAddressAuto ("auto:0"): a machine
// container's own, reachable from its host, where its loopback is not.
func (a *Agent) resolveDNSListen() error {
	host, port, err := net.SplitHostPort(a.cfg.DNS.Listen)
	if err != nil || host != MeshAddressAuto {
		return nil
	}
	addr, err := a.addressTowardServer()
	if err != nil {
		return fmt.Errorf("--dns-listen %s: %w", a.cfg.DNS.Listen, err)
	}
	a.cfg.DNS.Listen = net.JoinHostPort(addr, port)
	return nil
}

// answerContainers answers names where replica containers in host mode
// reach the agent too (ContainerDNS), and tells them so.
func (a *Agent) answerContainers(ctx context.Context) {
	addr := a.cfg.ContainerDNS
	if addr == MeshAddressAuto {
		var err error
		if addr, err = a.addressTowardServer(); err != nil {
			a.log.Warn("no resolver for replica containers", "err", err)
			return
		}
		if ip := net.ParseIP(addr); ip != nil && ip.IsLoopback() {
			a.log.Warn("no resolver for replica containers: this machine reaches the server over loopback, which containers do not reach; pass --container-dns an address they reach", "address", addr)
			return
		}
	}
	if addr != "" {
		a.containerDNS = a.answerNamesAlsoAt(ctx, addr)
	}
}

// DNSAddress is where the agent answers names ("" when it does not).
func (a *Agent) DNSAddress() string {
	if a.dns == nil {
		return ""
	}
	return a.dns.Addr()
}

// watchNames keeps the DNS server's names and the exposed ports this
// machine serves current: each call returns as soon as the cluster's
// names differ from the version the agent holds.
func (a *Agent) watchNames(ctx context.Context) {
	var held api.ClusterNames
	version := ""
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, a.cfg.NamesPollTimeout)
		got, err := a.pollClient().MachineNamesDelta(pollCtx, a.machineID, version)
		cancel()
		if err == nil && got.Base != "" {
			var whole api.ClusterNames
			if whole, err = endpoints.Apply(held, *got); err != nil {
				a.log.Warn("names delta does not apply: reading them whole", "err", err)
				version = ""
				continue
			}
			got = &whole
		}
		if err == nil {
			if got.Version != version {
				held, version = *got, got.Version
				if a.dns != nil {
					a.dns.Set(*got)
				}
				a.routes.offer(a.routesServed(*got))
				if got.Mesh != nil {
					a.network.offer(got.Mesh)
				}
				a.log.Debug("names changed", "version", got.Version, "records", len(got.Records), "exposed", len(got.Ingress))
			}
			continue
		}
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			a.log.Debug("names poll failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.cfg.RetryInterval):
		}
	}
}
