package api

import "time"

// UILogin is the body of POST /v1/ui/logins: a one-time code that opens the status page in
// a browser. Opening Path (relative to the engine's address) once sets a session cookie;
// the code then stops working, and it expires unused at ExpiresAt.
type UILogin struct {
	Code      string    `json:"code"`
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expires_at"`
}
