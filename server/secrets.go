package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/store"
)

// Server secrets (the join-signing key) are sealed in the store with the
// encryption key, which is kept out of it: Config.EncryptionKey
// ($GANTRY_ENCRYPTION_KEY), else DataDir/encryption-key, generated with
// mode 0600. Servers sharing a store need the same key.

func loadOrCreateEncryptionKey(cfg Config) (*auth.Sealer, error) {
	key := cfg.EncryptionKey
	if key == "" {
		path := filepath.Join(cfg.DataDir, "encryption-key")
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			key = strings.TrimSpace(string(data))
		case errors.Is(err, os.ErrNotExist):
			key = auth.NewEncryptionKey()
			if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
				return nil, fmt.Errorf("write encryption key: %w", err)
			}
		default:
			return nil, fmt.Errorf("read encryption key: %w", err)
		}
	}
	return auth.NewSealer(key)
}

// sealedMetaOrCreate reads a server secret, creating it first if need be;
// a value an older server stored in plain is sealed on the way.
func (s *Server) sealedMetaOrCreate(ctx context.Context, key string, create func() string) (string, error) {
	stored, err := s.metaOrCreate(ctx, key, func() string { return s.sealer.Seal(create(), key) })
	if err != nil {
		return "", err
	}
	if !auth.IsSealed(stored) {
		sealed := s.sealer.Seal(stored, key)
		if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.PutMeta(key, sealed) }); err != nil {
			return "", fmt.Errorf("seal server %s: %w", key, err)
		}
		return stored, nil
	}
	value, err := s.sealer.Open(stored, key)
	if err != nil {
		return "", fmt.Errorf("server %s: %w: every server sharing a store needs the same encryption key ($GANTRY_ENCRYPTION_KEY)", key, err)
	}
	return value, nil
}
