package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// maxBody bounds a JSON request body.
const maxBody = 1 << 20

// decode reads the request's JSON body into v strictly (decodeJSON).
func decode(req *http.Request, v any) error {
	return decodeJSON(http.MaxBytesReader(nil, req.Body, maxBody), v)
}

// decodeJSON reads exactly one JSON object into v: unknown fields, a second value or any
// other data after it (whitespace aside), and a body over maxBody are refused with an
// invalid error, naming the field where there is one.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return api.Errorf(api.CodeInvalid, "", "malformed request body: more than one JSON value; send exactly one object")
	default:
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return bodyError(err)
		}
		return api.Errorf(api.CodeInvalid, "", "malformed request body: unexpected data after the JSON object")
	}
}

// bodyError words a decoding failure, with the field it concerns when the decoder says.
func bodyError(err error) error {
	var (
		typeErr *json.UnmarshalTypeError
		tooBig  *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return api.Errorf(api.CodeInvalid, "", "malformed request body: larger than %d bytes", tooBig.Limit)
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return api.Errorf(api.CodeInvalid, typeErr.Field, "malformed request body: %s must be a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	// encoding/json words an unknown field as `json: unknown field "name"`.
	if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return api.Errorf(api.CodeInvalid, name, "malformed request body: unknown field %q", name)
	}
	if errors.Is(err, io.EOF) {
		return api.Errorf(api.CodeInvalid, "", "malformed request body: empty; send one JSON object")
	}
	return api.Errorf(api.CodeInvalid, "", "malformed request body: %v", err)
}
