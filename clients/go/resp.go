package sekka

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxLine bounds a reply line (and so an error message): a longer one is a protocol error.
const maxLine = 64 << 10

// conn is one RESP2 connection to one server, used by one goroutine at a time. Each command
// has one deadline for its whole exchange, so a server that drips its reply byte by byte is
// abandoned after the timeout. After any error the connection must not be used again: it may
// be out of step with the server.
type conn struct {
	nc       net.Conn
	r        *bufio.Reader
	out      []byte
	timeout  time.Duration
	received bool // a byte of the current command's reply came
}

// replyError is an error reply, "-PREFIX message".
type replyError struct {
	prefix string // the first word, e.g. "ERR", "LEASELOST"
	msg    string // the whole reply after '-'
}

func (e *replyError) Error() string { return e.msg }

// protocolError: the server's bytes were not the reply expected.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "protocol error: " + e.msg }

func protocolErrorf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// staleError: a connection failed before any byte of the reply came, and not by a timeout
// (the server had closed it while idle, or restarted). On a connection made before the
// command, the command can be sent once more on a new one.
type staleError struct{ err error }

func (e *staleError) Error() string { return e.err.Error() }
func (e *staleError) Unwrap() error { return e.err }

// dial connects to addr ("host:port"), over TLS with tlsConfig unless it is nil; the
// connect, name resolution and handshake included, must end within connectTimeout (or when
// ctx ends).
func dial(ctx context.Context, addr string, tlsConfig *tls.Config, connectTimeout, timeout time.Duration) (*conn, error) {
	d := net.Dialer{Timeout: connectTimeout}
	var nc net.Conn
	var err error
	if tlsConfig != nil {
		nc, err = (&tls.Dialer{NetDialer: &d, Config: tlsConfig}).DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("connect to %s timed out after %v", addr, connectTimeout)
		}
		return nil, err
	}
	c := &conn{nc: nc, timeout: timeout}
	c.r = bufio.NewReaderSize(c, maxLine)
	return c, nil
}

// Read is the bufio.Reader's source: it notes that a byte of the reply came.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.nc.Read(p)
	if n > 0 {
		c.received = true
	}
	return n, err
}

func (c *conn) close() { c.nc.Close() }

// ids sends args and reads an array of exactly want ids: integers, or decimal bulk strings.
func (c *conn) ids(args []string, want int) ([]int64, error) {
	if err := c.send(args); err != nil {
		return nil, c.fail(err)
	}
	ids, err := c.readIDs(want, args[0] == "SEG.NEXT" || args[0] == "STRICT.BATCH")
	if err != nil {
		return nil, c.fail(err)
	}
	return ids, nil
}

// integer sends args and reads one id (ID.NEXT's reply).
func (c *conn) integer(args ...string) (int64, error) {
	if err := c.send(args); err != nil {
		return 0, c.fail(err)
	}
	v, err := c.readID(false)
	if err != nil {
		return 0, c.fail(err)
	}
	return v, nil
}

// simple sends args and reads a simple string (AUTH's "+OK").
func (c *conn) simple(args ...string) (string, error) {
	if err := c.send(args); err != nil {
		return "", c.fail(err)
	}
	kind, rest, err := c.line()
	if err != nil {
		return "", c.fail(err)
	}
	switch kind {
	case '+':
		return string(rest), nil
	case '-':
		return "", newReplyError(rest)
	}
	return "", protocolErrorf("a reply starting with %q where a simple string was expected", kind)
}

// send writes one command as an array of bulk strings, after setting the deadline of the
// whole exchange.
func (c *conn) send(args []string) error {
	c.received = false
	if c.r.Buffered() > 0 {
		c.received = true // not stale: the server said something nobody asked for
		return protocolErrorf("%d bytes came before the command was sent", c.r.Buffered())
	}
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	c.out = appendCommand(c.out[:0], args)
	_, err := c.nc.Write(c.out)
	return err
}

func appendCommand(out []byte, args []string) []byte {
	out = append(out, '*')
	out = strconv.AppendInt(out, int64(len(args)), 10)
	out = append(out, '\r', '\n')
	for _, a := range args {
		out = append(out, '$')
		out = strconv.AppendInt(out, int64(len(a)), 10)
		out = append(out, '\r', '\n')
		out = append(out, a...)
		out = append(out, '\r', '\n')
	}
	return out
}

// fail turns a transport error into what the pool decides on: a timeout, a stale connection
// (the peer closed it before any byte of the reply), or the error as it is.
func (c *conn) fail(err error) error {
	var pe *protocolError
	var re *replyError
	switch {
	case errors.As(err, &pe) || errors.As(err, &re):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("no reply within %v", c.timeout)
	case errors.Is(err, io.EOF):
		err = fmt.Errorf("the server closed the connection: %w", err)
	}
	if !c.received && closedByPeer(err) {
		return &staleError{err: err}
	}
	return err
}

func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// line reads one reply line: its type byte and the rest without "\r\n" (valid until the
// next read).
func (c *conn) line() (byte, []byte, error) {
	b, err := c.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return 0, nil, protocolErrorf("a reply line over %d bytes", maxLine)
	}
	if err != nil {
		return 0, nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return 0, nil, protocolErrorf("a reply line %q", b)
	}
	return b[0], b[1 : len(b)-2], nil
}

func newReplyError(rest []byte) *replyError {
	msg := string(rest)
	prefix, _, _ := strings.Cut(msg, " ")
	return &replyError{prefix: prefix, msg: msg}
}

// readIDs reads a batch's reply: an array of exactly want distinct ids, not negative, increasing
// if increasing (a tag's; a snowflake layout may be descending or sharded).
func (c *conn) readIDs(want int, increasing bool) ([]int64, error) {
	kind, rest, err := c.line()
	if err != nil {
		return nil, err
	}
	switch kind {
	case '-':
		return nil, newReplyError(rest)
	case '*':
	default:
		return nil, protocolErrorf("a reply starting with %q where an array of ids was expected", kind)
	}
	if n, ok := parseInt(rest); !ok || n != int64(want) {
		return nil, protocolErrorf("an array of %q elements where %d ids were expected", rest, want)
	}
	// Anything else is a broken server (docs/contract.md), whose reply must not reach a caller.
	ids := make([]int64, want)
	for i := range ids {
		if ids[i], err = c.readID(true); err != nil {
			return nil, err
		}
		if ids[i] < 0 || (increasing && i > 0 && ids[i] <= ids[i-1]) {
			return nil, protocolErrorf("not an id, or not increasing, in a batch: %d at %d", ids[i], i)
		}
	}
	if !increasing {
		sorted := append([]int64(nil), ids...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		for i := 1; i < len(sorted); i++ {
			if sorted[i] == sorted[i-1] {
				return nil, protocolErrorf("an id twice in a batch: %d", sorted[i])
			}
		}
	}
	return ids, nil
}

// readID reads one id: an integer, or a bulk string of decimal digits.
func (c *conn) readID(inArray bool) (int64, error) {
	kind, rest, err := c.line()
	if err != nil {
		return 0, err
	}
	switch kind {
	case ':':
		if v, ok := parseInt(rest); ok {
			return v, nil
		}
		return 0, protocolErrorf("an integer reply %q", rest)
	case '$':
		return c.bulkID(rest)
	case '-':
		if inArray {
			return 0, protocolErrorf("an error inside an array: %s", rest)
		}
		return 0, newReplyError(rest)
	}
	return 0, protocolErrorf("a reply starting with %q where an id was expected", kind)
}

// bulkID reads the body of a bulk string of `length` bytes holding a decimal id.
func (c *conn) bulkID(length []byte) (int64, error) {
	n, ok := parseInt(length)
	if !ok || n < 1 || n > 20 {
		return 0, protocolErrorf("a bulk string of %q bytes where an id was expected", length)
	}
	var body [22]byte
	b := body[:n+2]
	if _, err := io.ReadFull(c.r, b); err != nil {
		return 0, err
	}
	v, ok := parseInt(b[:n])
	if !ok || b[n] != '\r' || b[n+1] != '\n' {
		return 0, protocolErrorf("a bulk string %q where an id was expected", b)
	}
	return v, nil
}

// parseInt parses a decimal int64 strictly: an optional '-', then digits only.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0') // 19 digits cannot overflow a uint64
	}
	switch {
	case neg && v <= 1<<63:
		return -int64(v), true // -int64(1<<63) wraps to MinInt64, as it should
	case !neg && v < 1<<63:
		return int64(v), true
	}
	return 0, false
}
