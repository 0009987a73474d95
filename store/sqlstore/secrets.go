package sqlstore

import (
	"encoding/json"
	"fmt"

	"github.com/gantry-dev/gantry/api"
)

func (t *tx) GetSecret(name string) (*api.Secret, string, error) {
	var data, sealed string
	if err := t.queryRow(`SELECT data, sealed FROM secrets WHERE name = ?`, name).Scan(&data, &sealed); err != nil {
		return nil, "", t.dialect.notFound("secret", name, err)
	}
	var sec api.Secret
	if err := json.Unmarshal([]byte(data), &sec); err != nil {
		return nil, "", fmt.Errorf("decode secret %q: %w", name, err)
	}
	return &sec, sealed, nil
}

func (t *tx) ListSecrets() ([]*api.Secret, error) {
	return listJSON[api.Secret](t, "secrets", `SELECT data FROM secrets ORDER BY name`)
}

func (t *tx) PutSecret(sec *api.Secret, sealed string) error {
	data, err := encode(sec)
	if err != nil {
		return err
	}
	return t.exec("put secret", `INSERT INTO secrets(name, data, sealed) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET data = excluded.data, sealed = excluded.sealed`,
		sec.Metadata.Name, data, sealed)
}

func (t *tx) DeleteSecret(name string) error {
	return t.exec("delete secret", `DELETE FROM secrets WHERE name = ?`, name)
}
