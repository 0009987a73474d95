package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
)

// Recover reconciles the store with what the providers really run, after a
// server start: instances of known machines are adopted (a launch intent
// whose call never returned gets its provider id), machines whose instance
// is gone are terminated (their replicas go back to pending), and tagged
// instances the store does not know are terminated.
func (f *Fleet) Recover(ctx context.Context) error {
	keys, err := f.providerKeysInUse(ctx)
	if err != nil {
		return err
	}
	for _, key := range keys {
		prov, err := f.providers.Get(key)
		if err != nil {
			return fmt.Errorf("recover machines of provider %s: %w", key, err)
		}
		if err := f.recoverProvider(ctx, key, prov); err != nil {
			return fmt.Errorf("recover machines of provider %s: %w", key, err)
		}
	}
	return nil
}

// providerKeysInUse are the provider instances of every cluster and of
// every machine recorded (a deleted cluster's machines too).
func (f *Fleet) providerKeysInUse(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, k := range f.providers.Keys() {
		seen[k] = true
	}
	err := f.store.View(ctx, func(tx store.Tx) error {
		clusters, err := tx.ListClusters()
		if err != nil {
			return err
		}
		for _, c := range clusters {
			if key, _, err := f.providers.For(c.Spec.Provider); err == nil {
				seen[key] = true
			} else {
				f.log.Warn("cluster provider unavailable", "cluster", c.Metadata.Name, "err", err)
			}
		}
		machines, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		for _, m := range machines {
			seen[KeyOf(m)] = true
		}
		return err
	})
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, err
}

func (f *Fleet) recoverProvider(ctx context.Context, name string, prov provisioner.Provisioner) error {
	instances, err := prov.List(ctx, provisioner.Filter{Tags: map[string]string{
		provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagInstallation: f.cfg.InstallationID,
	}})
	if err != nil {
		return err
	}
	byMachine := map[string]provisioner.Instance{}
	for _, inst := range instances {
		byMachine[inst.Tags[provisioner.TagMachine]] = inst
	}
	var orphans []provisioner.Instance
	var gone []*api.Machine
	err = f.store.Update(ctx, func(tx store.Tx) error {
		machines, err := tx.ListMachines(store.MachineFilter{})
		if err != nil {
			return err
		}
		known := map[string]*api.Machine{}
		for _, m := range machines {
			if KeyOf(m) != name {
				continue
			}
			known[m.ID] = m
			inst, found := byMachine[m.ID]
			switch {
			case !m.Live():
			case found && m.ProviderID == "":
				m.ProviderID, m.Addresses = inst.ID, inst.Addresses
				if m.JoinState == api.JoinProvisioning {
					if err := SetJoinState(m, api.JoinBooting, time.Now().UTC()); err != nil {
						return err
					}
				}
				if err := tx.PutMachine(m); err != nil {
					return err
				}
				if err := store.Record(tx, api.EventNormal, "Adopted", "Machine", m.ID, "found instance %s of an interrupted launch", inst.ID); err != nil {
					return err
				}
			case !found && m.ProviderID != "":
				gone = append(gone, m)
			}
		}
		for _, inst := range instances {
			if m, ok := known[inst.Tags[provisioner.TagMachine]]; (!ok || !m.Live()) && time.Since(inst.LaunchedAt) > f.cfg.OrphanGrace {
				orphans = append(orphans, inst)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range gone {
		_ = f.Terminate(ctx, m.ID, CauseVanished, "instance "+m.ProviderID+" no longer exists")
	}
	for _, inst := range orphans {
		f.log.Warn("terminating tagged instance the store does not know", "instance", inst.ID, "machine", inst.Tags[provisioner.TagMachine])
		callCtx, cancel := context.WithTimeout(ctx, f.cfg.ProviderTimeout)
		err := prov.Terminate(callCtx, inst.ID)
		cancel()
		if err != nil {
			f.log.Warn("terminate orphan", "instance", inst.ID, "err", err)
		}
		_ = f.store.Update(ctx, func(tx store.Tx) error {
			return store.Record(tx, api.EventWarning, "OrphanTerminated", "Machine", inst.Tags[provisioner.TagMachine],
				"instance %s was tagged by this server but unknown to its store; terminated at %s", inst.ID, time.Now().UTC().Format(time.RFC3339))
		})
	}
	return nil
}
