package driver

import (
	"errors"
	"fmt"
)

// LoginError says the OLT refused the credentials. It is its own type
// because the API answers it with envelope code 401, every other failure
// with 502.
type LoginError struct {
	Host   string
	Reason string // what the OLT or the SSH layer said
}

func (e *LoginError) Error() string {
	return fmt.Sprintf("olt %s refused the login: %s", e.Host, e.Reason)
}

// HostKeyError says an OLT presented another SSH host key than the one
// recorded for it: it may be another device. Nothing is sent until the
// operator accepts the new key.
type HostKeyError struct {
	Host        string
	Fingerprint string // of the key presented now
}

func (e *HostKeyError) Error() string {
	return fmt.Sprintf("olt %s presented another SSH host key (%s) than the one recorded: refused; if the OLT was replaced, accept the new key (POST /olts/{name} with accept_host_key=true)", e.Host, e.Fingerprint)
}

// CommandError is an answer of the OLT that reports a failure: a
// `Failure: ...` line, `% Unknown command`, `% Parameter error` and the
// like. Text is the OLT's own words, so an operator can look them up.
type CommandError struct {
	Command string
	Text    string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("olt refused %q: %s", e.Command, e.Text)
}

// GuardError is a refusal by the shared-OLT rules of Document 3, decided by
// the router before anything is sent. Overridable says whether force would
// have let the call through.
type GuardError struct {
	Reason      string
	Overridable bool
}

func (e *GuardError) Error() string {
	if e.Overridable {
		return "refused on a shared OLT: " + e.Reason + " (force=true overrides)"
	}
	return "refused on a shared OLT: " + e.Reason
}

// ArgError is a request the driver rejects before contacting the OLT.
type ArgError struct{ Reason string }

func (e *ArgError) Error() string { return "bad argument: " + e.Reason }

// ErrTimeout is wrapped by errors of calls that ran out of time waiting for
// the OLT.
var ErrTimeout = errors.New("timed out waiting for the OLT")

// Error wraps every failure a driver method returns with the operation
// name and the transcript up to the failure, which the API always attaches
// to a failed answer.
type Error struct {
	Op         string
	Err        error
	Transcript []Exchange
}

func (e *Error) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Code maps an error to the envelope code of Document 3: 401 for a refused
// login, 502 for any other OLT failure, 200 for nil.
func Code(err error) int {
	if err == nil {
		return 200
	}
	var le *LoginError
	if errors.As(err, &le) {
		return 401
	}
	return 502
}
