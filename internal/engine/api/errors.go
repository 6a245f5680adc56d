package api

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorCode is the stable, machine-readable reason of an API error. Clients branch on it;
// the message is for people and may change.
type ErrorCode string

const (
	CodeInvalid       ErrorCode = "invalid"
	CodeNotFound      ErrorCode = "not_found"
	CodeConflict      ErrorCode = "conflict"
	CodeQuotaExceeded ErrorCode = "quota_exceeded"
	CodeUnauthorized  ErrorCode = "unauthorized"
	// CodeForbidden: the token is good, but its role or workspaces do not allow the call.
	CodeForbidden   ErrorCode = "forbidden"
	CodeUnavailable ErrorCode = "unavailable"
	CodeInternal    ErrorCode = "internal"
)

// HTTPStatus is the one place that maps codes to HTTP status codes.
func (c ErrorCode) HTTPStatus() int {
	switch c {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeQuotaExceeded:
		return http.StatusUnprocessableEntity
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Error is the body of every failed API call, modelled on apimachinery's Status: a stable
// code, a human message and, when one input caused it, the dotted path of that input
// ("quotas.standardNCSv3Family") so the provider can attach it to the right attribute.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	Field   string    `json:"field,omitempty"`
	// Status is the HTTP status the error travelled with; set by the client.
	Status int `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// ErrorBody is the JSON envelope of an error response.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Errorf builds an error with a code and a field path (empty when no single input is at fault).
func Errorf(code ErrorCode, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of an API error anywhere in err's chain, or "" for other errors.
func CodeOf(err error) ErrorCode {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Code
	}
	return ""
}

// FieldOf returns the field path of an API error anywhere in err's chain.
func FieldOf(err error) string {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Field
	}
	return ""
}

func IsNotFound(err error) bool      { return CodeOf(err) == CodeNotFound }
func IsConflict(err error) bool      { return CodeOf(err) == CodeConflict }
func IsInvalid(err error) bool       { return CodeOf(err) == CodeInvalid }
func IsQuotaExceeded(err error) bool { return CodeOf(err) == CodeQuotaExceeded }
func IsUnauthorized(err error) bool  { return CodeOf(err) == CodeUnauthorized }
func IsForbidden(err error) bool     { return CodeOf(err) == CodeForbidden }

// Codes lists every error code, in the order the OpenAPI document gives them.
func Codes() []ErrorCode {
	return []ErrorCode{CodeInvalid, CodeNotFound, CodeConflict, CodeQuotaExceeded, CodeUnauthorized, CodeForbidden, CodeUnavailable, CodeInternal}
}
