package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tmpfsMagic is the file system type of a tmpfs (statfs(2)).
const tmpfsMagic = 0x01021994

// writeSecretFiles writes a replica's secret values, one file each, into
// dir/<container> on a tmpfs: the parent is 0700 (no other user of the
// host reads them), the files 0444 (any user of the container does). A
// directory not on a tmpfs is refused: the values must never reach a
// disk.
func writeSecretFiles(dir, container string, files map[string]string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("secrets dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("secrets dir: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return "", fmt.Errorf("secrets dir %s: %w", dir, err)
	}
	if fs.Type != tmpfsMagic {
		return "", fmt.Errorf("secrets dir %s is not on a tmpfs: refusing to write secret values to disk (set the agent's --docker-secrets-dir)", dir)
	}
	replicaDir := filepath.Join(dir, container)
	if err := os.RemoveAll(replicaDir); err != nil {
		return "", fmt.Errorf("secrets of %s: %w", container, err)
	}
	if err := os.Mkdir(replicaDir, 0o755); err != nil {
		return "", fmt.Errorf("secrets of %s: %w", container, err)
	}
	for name, value := range files {
		if name == "" || name != filepath.Base(name) || name[0] == '.' {
			return "", errors.Join(fmt.Errorf("secret file name %q", name), os.RemoveAll(replicaDir))
		}
		if err := os.WriteFile(filepath.Join(replicaDir, name), []byte(value), 0o444); err != nil {
			return "", errors.Join(fmt.Errorf("write secret file %s of %s: %w", name, container, err), os.RemoveAll(replicaDir))
		}
	}
	return replicaDir, nil
}

// removeSecretFiles removes a replica's secret files (its container is
// gone).
func removeSecretFiles(dir, container string) {
	if container != "" && container == filepath.Base(container) {
		_ = os.RemoveAll(filepath.Join(dir, container))
	}
}
