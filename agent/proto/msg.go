package proto

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"

	"github.com/wsu-project/wsu/host"
)

// Hello is the agent's first frame. Clients decode it leniently, so that
// they can read Protocol from any agent.
type Hello struct {
	Protocol     int    `json:"protocol"`
	AgentVersion string `json:"agent_version"`
	AgentSHA256  string `json:"agent_sha256"`
	// Platform names the agent's backend, e.g. "windows" or "sim".
	Platform string      `json:"platform"`
	Facts    *host.Facts `json:"facts,omitempty"`
	// FactsError says why Facts is missing.
	FactsError string `json:"facts_error,omitempty"`
}

// Request is a request frame's payload.
type Request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	// Stream says the op's input follows as data frames and a data_end.
	Stream bool `json:"stream,omitempty"`
}

// Response is a response frame's payload: Result or Error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Code classifies an error on the wire, so that the sentinel errors callers
// test with errors.Is survive it.
type Code string

const (
	CodeNotSupported Code = "not_supported" // host.ErrNotSupported
	CodeUnreachable  Code = "unreachable"   // host.ErrUnreachable
	CodeNotFound     Code = "not_found"     // fs.ErrNotExist
	CodeExists       Code = "exists"        // fs.ErrExist
	CodePermission   Code = "permission"    // fs.ErrPermission
	CodeInvalid      Code = "invalid"       // ErrInvalid: a bad request
	CodeCancelled    Code = "cancelled"     // context.Canceled
	CodeTimeout      Code = "timeout"       // context.DeadlineExceeded
	CodeInternal     Code = "internal"      // anything else
)

// ErrInvalid is a request the agent cannot make sense of: unknown op, bad
// arguments, an oversized message.
var ErrInvalid = errors.New("invalid agent request")

// Error is an error on the wire.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// WireError describes err for the wire.
func WireError(err error) *Error {
	return &Error{Code: CodeOf(err), Message: err.Error()}
}

// CodeOf classifies err, most specific sentinel first.
func CodeOf(err error) Code {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return CodeInternal
}

var sentinels = []struct {
	code Code
	err  error
}{
	{CodeNotSupported, host.ErrNotSupported},
	{CodeUnreachable, host.ErrUnreachable},
	{CodeInvalid, ErrInvalid},
	{CodeNotFound, fs.ErrNotExist},
	{CodeExists, fs.ErrExist},
	{CodePermission, fs.ErrPermission},
	{CodeCancelled, context.Canceled},
	{CodeTimeout, context.DeadlineExceeded},
}

// Err turns a wire error back into a Go error that wraps its code's
// sentinel.
func (e *Error) Err() error { return &RemoteError{Code: e.Code, Message: e.Message} }

// RemoteError is an error the agent reported. Its message is the agent's,
// unchanged, so errors read the same over the agent as on the local host.
type RemoteError struct {
	Code    Code
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinel of the error's code, nil for internal and
// unknown codes.
func (e *RemoteError) Unwrap() error {
	for _, s := range sentinels {
		if s.code == e.Code {
			return s.err
		}
	}
	return nil
}
