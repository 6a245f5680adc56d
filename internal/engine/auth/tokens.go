package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// TokenName is the naming rule of API tokens.
var TokenName = validation.NameRule{
	Kind:    "token",
	Pattern: lazyregexp.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`),
	Explain: "1 to 63 characters: letters, digits, '.', '-' and '_', starting with a letter or digit",
}

// secretPrefix starts every secret Create makes, so a leaked one is easy to recognise
// (and to scan for).
const secretPrefix = "mlc_"

// record is a token as stored: its secret only as a SHA-256 digest. The secret is 256
// random bits, so a digest without a salt or a slow hash loses nothing.
type record struct {
	api.Token
	SHA256 string `json:"sha256"`
}

// Tokens are the API tokens in the engine's store, cached in memory: every request looks
// its token up, and the store is read once.
type Tokens struct {
	st    *store.Store
	clock clock.PassiveClock
	mu    sync.RWMutex
	list  []record
}

// OpenTokens reads the tokens of the store.
func OpenTokens(st *store.Store, c clock.PassiveClock) (*Tokens, error) {
	t := &Tokens{st: st, clock: c}
	err := st.View(func(tx *store.Tx) error {
		var err error
		t.list, err = store.List[record](tx, store.Tokens, "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading tokens: %w", err)
	}
	return t, nil
}

// digest is the hex SHA-256 of a secret.
func digest(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum[:])
	return out
}

// Create makes a token and returns it with its secret, which is shown this once.
func (t *Tokens) Create(spec api.TokenSpec, createdBy string) (*api.TokenCreated, error) {
	if err := TokenName.Check("name", spec.Name); err != nil {
		return nil, err
	}
	if spec.Name == api.TokenFileName {
		return nil, api.Errorf(api.CodeInvalid, "name", "token name %q is the token file's; choose another", spec.Name)
	}
	if err := ValidRole(spec.Role); err != nil {
		return nil, err
	}
	for i, ws := range spec.Workspaces {
		if err := validation.WorkspaceName.Check(fmt.Sprintf("workspaces[%d]", i), ws); err != nil {
			return nil, err
		}
	}
	if spec.ExpiresInSeconds < 0 {
		return nil, api.Errorf(api.CodeInvalid, "expires_in_seconds", "expires_in_seconds must be above 0, or absent for a token that does not expire; got %d", spec.ExpiresInSeconds)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("making a token secret: %w", err)
	}
	secret := secretPrefix + base64.RawURLEncoding.EncodeToString(raw)
	now := t.clock.Now().UTC()
	rec := record{Token: api.Token{
		Name: spec.Name, Role: spec.Role, Workspaces: sortedUnique(spec.Workspaces),
		CreatedAt: &now, CreatedBy: createdBy,
	}, SHA256: string(digest(secret))}
	if spec.ExpiresInSeconds > 0 {
		exp := now.Add(time.Duration(spec.ExpiresInSeconds) * time.Second)
		rec.ExpiresAt = &exp
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.st.Update(func(tx *store.Tx) error {
		var prior record
		if ok, err := tx.Get(store.Tokens, spec.Name, &prior); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "a token named %q exists; revoke it first or choose another name", spec.Name)
		}
		return tx.Put(store.Tokens, spec.Name, rec)
	})
	if err != nil {
		return nil, err
	}
	t.list = append(t.list, rec)
	return &api.TokenCreated{Token: rec.Token, Secret: secret}, nil
}

// List returns the stored tokens by name, without their secrets.
func (t *Tokens) List() []api.Token {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]api.Token, 0, len(t.list))
	for _, r := range t.list {
		out = append(out, r.Token)
	}
	slices.SortFunc(out, func(a, b api.Token) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Revoke deletes a token: from the next request on, its secret is unknown (401).
func (t *Tokens) Revoke(name string) error {
	if name == api.TokenFileName {
		return api.Errorf(api.CodeInvalid, "name", "the token file's token cannot be revoked through the API: replace the file's contents (or delete the data dir's api.token) and restart the engine")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.list, func(r record) bool { return r.Name == name })
	if i < 0 {
		return api.Errorf(api.CodeNotFound, "name", "no token named %q", name)
	}
	if err := t.st.Update(func(tx *store.Tx) error { return tx.Delete(store.Tokens, name) }); err != nil {
		return err
	}
	t.list = slices.Delete(t.list, i, i+1)
	return nil
}

// Lookup finds the token whose secret is given. It compares the secret's digest with
// every token's in constant time, so the time it takes says nothing about which digest
// came close. expired reports a known token past its expiry (found is then false).
func (t *Tokens) Lookup(secret string) (id Identity, found, expired bool) {
	d := digest(secret)
	t.mu.RLock()
	defer t.mu.RUnlock()
	match := -1
	for i, r := range t.list {
		if subtle.ConstantTimeCompare(d, []byte(r.SHA256)) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Identity{}, false, false
	}
	r := t.list[match]
	id = Identity{Name: r.Name, Role: r.Role, Workspaces: r.Workspaces}
	if r.ExpiresAt != nil && !t.clock.Now().Before(*r.ExpiresAt) {
		return id, false, true
	}
	return id, true, false
}

func sortedUnique(list []string) []string {
	out := append([]string{}, list...)
	slices.Sort(out)
	return slices.Compact(out)
}
