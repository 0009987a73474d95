package sqlstore

import (
	"encoding/json"
	"fmt"

	"github.com/gantry-dev/gantry/api"
)

func (t *tx) GetToken(id string) (*api.Token, []byte, error) {
	var data string
	var hash []byte
	if err := t.queryRow(`SELECT data, hash FROM tokens WHERE id = ?`, id).Scan(&data, &hash); err != nil {
		return nil, nil, t.dialect.notFound("token", id, err)
	}
	var tok api.Token
	if err := json.Unmarshal([]byte(data), &tok); err != nil {
		return nil, nil, fmt.Errorf("decode token %q: %w", id, err)
	}
	return &tok, hash, nil
}

func (t *tx) ListTokens() ([]*api.Token, error) {
	return listJSON[api.Token](t, "tokens", `SELECT data FROM tokens ORDER BY id`)
}

// PutToken writes a token; an empty hash keeps the stored one.
func (t *tx) PutToken(tok *api.Token, hash []byte) error {
	data, err := encode(tok)
	if err != nil {
		return err
	}
	if hash == nil {
		return t.exec("put token", `UPDATE tokens SET data = ? WHERE id = ?`, data, tok.ID)
	}
	return t.exec("put token", `INSERT INTO tokens(id, hash, data) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET hash = excluded.hash, data = excluded.data`,
		tok.ID, hash, data)
}
