package sekka

import (
	"errors"
	"fmt"
)

// The kinds of error the client returns. Test for them with errors.Is; the error itself says
// what happened in one line.
var (
	// ErrInvalidArgument: the client refused an option or an argument itself, before any
	// network (a malformed server address, batch sizes out of order, a negative count, ...).
	ErrInvalidArgument = errors.New("sekka: invalid argument")
	// ErrNoServer: no server could serve and the buffer is empty. The error names every
	// server with its last error, or says that no ids came within the wait bound.
	ErrNoServer = errors.New("sekka: no server could serve")
	// ErrAuth: a server refused the token (NOAUTH, WRONGPASS, or an ERR reply to AUTH).
	ErrAuth = errors.New("sekka: a server refused the token")
	// ErrRefused: a server refused the request (an unknown tag, a bad argument). The error
	// is a *RefusedError carrying the server's message.
	ErrRefused = errors.New("sekka: a server refused the request")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("sekka: the client is closed")
)

// kindError is an error of one of the kinds above with its own message.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return "sekka: " + e.msg }

// Is makes errors.Is(err, kind) hold.
func (e *kindError) Is(target error) bool { return target == e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// errClosed is what every call returns after Close.
var errClosed = errorf(ErrClosed, "the client is closed")

// RefusedError is a request a server refused with an error reply that is neither about the
// token nor a reason to try another server, e.g. an unknown tag. errors.Is(err, ErrRefused)
// holds for it; errors.As gives the server's message.
type RefusedError struct {
	Server  string // the server as given in Options.Servers
	Command string // the command refused, e.g. "SEG.NEXT invoice 1000"
	Reply   string // the server's error reply without its leading '-', e.g. `ERR tag "x" is not found`
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("sekka: server %s refused %s: %s", e.Server, e.Command, e.Reply)
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }
