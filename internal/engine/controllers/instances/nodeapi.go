package instances

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"os"
	"strconv"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// NodeAPI is how an application on an instance's node reaches the engine to report
// activity (DESIGN 3: activity reported through the API keeps an instance awake).
type NodeAPI struct {
	// Endpoint is the engine's API address as the node reaches it (MLCOMPUTE_ENDPOINT);
	// empty when the node cannot reach it (a loopback or unix listener seen from a remote
	// node), and then no endpoint or token is given.
	Endpoint string
	// CACertFile is the PEM file, on the engine's machine, of the CA of a TLS endpoint;
	// empty without TLS, or when the endpoint's certificate chains to the system's roots.
	// Its content goes in MLCOMPUTE_CA_CERT, so a remote node needs no copy of the file.
	CACertFile string
	// Key signs activity tokens. Empty: no token is given and none is accepted.
	Key []byte
}

// ActivityTokenPrefix starts every activity token, so it is never mistaken for the API
// token in a log line someone pastes.
const ActivityTokenPrefix = "mlact_"

// ActivityToken is the token that allows reporting activity on one instance and nothing
// else. It is an HMAC of the instance's workspace, name and creation time under the
// engine's key, so nothing is stored: an instance deleted and created again under the
// same name gets a new token, and the old one is refused.
func ActivityToken(key []byte, workspace, name string, createdOn time.Time) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(workspace + "/" + name + "\x00" + strconv.FormatInt(createdOn.UnixNano(), 10)))
	return ActivityTokenPrefix + hex.EncodeToString(mac.Sum(nil))
}

func activityToken(key []byte, rec model.Compute) string {
	return ActivityToken(key, rec.Workspace, rec.Name, rec.CreatedOn)
}

// nodeEnv is the environment every process the engine starts on an instance's node gets
// (sessions, setup scripts, jobs): which instance it is on and, where the node can reach
// the engine, the endpoint and a token that may only report activity on this instance.
func (c *Controller) nodeEnv(rec model.Compute) map[string]string {
	env := map[string]string{"MLCOMPUTE_COMPUTE": rec.Name, "MLCOMPUTE_WORKSPACE": rec.Workspace}
	if c.nodeAPI.Endpoint == "" || len(c.nodeAPI.Key) == 0 {
		return env
	}
	env["MLCOMPUTE_ENDPOINT"] = c.nodeAPI.Endpoint
	env["MLCOMPUTE_TOKEN"] = activityToken(c.nodeAPI.Key, rec)
	if c.nodeAPI.CACertFile != "" {
		// Read at each start: the engine makes its CA after it is built, when it first
		// listens with TLS.
		if pem, err := os.ReadFile(c.nodeAPI.CACertFile); err == nil {
			env["MLCOMPUTE_CA_CERT"] = string(pem)
		} else {
			c.log.Warn("the instance's processes get no CA for the engine's endpoint", "ca_file", c.nodeAPI.CACertFile, "error", err)
		}
	}
	return env
}

// ActivityTokenValid reports whether token is the activity token of the instance
// workspace/name as it exists now.
func (c *Controller) ActivityTokenValid(workspace, name, token string) bool {
	if len(c.nodeAPI.Key) == 0 {
		return false
	}
	var rec model.Compute
	var found bool
	_ = c.core.View(func(tx *store.Tx) error {
		r, err := model.GetCompute(tx, workspace, name)
		rec, found = r, err == nil && r.Instance != nil && !r.Serverless
		return nil
	})
	if !found {
		return false
	}
	want := activityToken(c.nodeAPI.Key, rec)
	return subtle.ConstantTimeCompare([]byte(token), []byte(want)) == 1
}
