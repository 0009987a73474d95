package server

import (
	"errors"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
)

// instanceType is m's instance type in its provider's catalog (nil when
// unknown: a machine joined by hand has no type).
func (s *Server) instanceType(tx store.Tx, m *api.Machine) (*provisioner.InstanceType, error) {
	if m.InstanceType == "" {
		return nil, nil
	}
	cl, err := tx.GetCluster(m.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	types, ok := s.registry.Catalog(cl.Spec.Provider)
	if !ok {
		return nil, nil
	}
	for _, it := range types {
		if it.Name == m.InstanceType {
			return &it, nil
		}
	}
	return nil, nil
}
