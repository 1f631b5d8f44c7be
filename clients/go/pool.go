package sekka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// failoverReply: after this error reply another server is tried (this one cannot issue ids
// now).
func failoverReply(prefix string) bool {
	return prefix == "LEASELOST" || prefix == "CLOCKBACKWARDS" || prefix == "UNAVAILABLE"
}

// authReply: the server wants a token, or a different one.
func authReply(prefix string) bool { return prefix == "NOAUTH" || prefix == "WRONGPASS" }

type server struct {
	name      string // as given in Options.Servers
	addr      string // for the dialer
	conn      *conn  // nil when not connected; written under pool.mu by the refill goroutine
	downUntil time.Time
	backoff   time.Duration
	lastErr   string
}

// pool is the list of servers, used by the refill goroutine only (close excepted). A failed
// server is skipped until its backoff, doubling from backoffMin to backoffMax, runs out.
type pool struct {
	servers                 []*server
	token                   string
	tls                     *tls.Config // nil: plain TCP
	connectTimeout, timeout time.Duration
	backoffMin, backoffMax  time.Duration
	current                 int // the server that answered last

	// ctx ends a connect in progress at close (a read in progress ends by closing its conn).
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed and the servers' conn fields against close
	closed bool

	failovers    atomic.Uint64 // moves to another server
	serverErrors atomic.Uint64 // calls a server failed (it was then backed off)
}

func newPool(o *Options, addrs []string) *pool {
	p := &pool{
		token:          o.Token,
		tls:            o.TLS,
		connectTimeout: o.ConnectTimeout,
		timeout:        o.Timeout,
		backoffMin:     o.BackoffMin,
		backoffMax:     o.BackoffMax,
	}
	for i, name := range o.Servers {
		p.servers = append(p.servers, &server{name: name, addr: addrs[i]})
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// parseServer checks one "host:port" or "[v6]:port" and returns the address to dial.
func parseServer(i int, text string) (string, error) {
	host, port, err := net.SplitHostPort(text)
	n, perr := strconv.Atoi(port)
	if err != nil || host == "" || strings.ContainsAny(host, " \t,") || perr != nil ||
		n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" { // digits only: no "+80"
		return "", errorf(ErrInvalidArgument,
			"servers[%d] %q is not host:port (or [v6]:port, a port from 1 to 65535)", i, text)
	}
	return net.JoinHostPort(host, port), nil
}

// names lists the servers as given: "h:p, h:p".
func (p *pool) names() string {
	names := make([]string, len(p.servers))
	for i, s := range p.servers {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// close ends the pool's network calls in progress and closes every connection; the refill
// goroutine then opens no other.
func (p *pool) close() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.servers {
		if s.conn != nil {
			s.conn.close()
		}
	}
}

func (p *pool) setConn(s *server, c *conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close()
		return errClosed
	}
	s.conn = c
	return nil
}

func (p *pool) drop(s *server) {
	if s.conn == nil {
		return
	}
	s.conn.close()
	p.mu.Lock()
	s.conn = nil
	p.mu.Unlock()
}

// connect opens s's connection and authenticates on it. The connection is s's before AUTH,
// so that close can end AUTH too.
func (p *pool) connect(s *server) error {
	c, err := dial(p.ctx, s.addr, p.tls, p.connectTimeout, p.timeout)
	if err != nil {
		return err
	}
	if err := p.setConn(s, c); err != nil {
		return err
	}
	if p.token != "" {
		if _, err := c.simple("AUTH", p.token); err != nil {
			p.drop(s)
			var re *replyError
			if errors.As(err, &re) && (authReply(re.prefix) || re.prefix == "ERR") {
				return errorf(ErrAuth, "server %s refused the token: %s", s.name, re.msg)
			}
			return err
		}
	}
	return nil
}

// callOn sends args to s and reads want ids. A connection made before this call that fails
// before any byte of the reply (the server closed it while idle, or restarted) is replaced
// and the command sent once more, without counting against the server: a command the server
// did run costs a range, never an id. After any error the connection is dropped.
func (p *pool) callOn(s *server, args []string, want int) ([]int64, error) {
	reused := s.conn != nil
	if !reused {
		if err := p.connect(s); err != nil {
			return nil, err
		}
	}
	ids, err := s.conn.ids(args, want)
	var stale *staleError
	if err != nil && reused && errors.As(err, &stale) {
		p.drop(s)
		if err := p.connect(s); err != nil {
			return nil, err
		}
		ids, err = s.conn.ids(args, want)
	}
	if err != nil {
		p.drop(s)
	}
	return ids, err
}

// call returns the reply of the first server that answers, trying each once from the current
// one (those backing off are skipped; when all are, the one that comes back first is tried).
// A refused token, a refused request and Close end it at once; otherwise, when no server
// answered, the error names each server with its last error.
func (p *pool) call(args []string, want int) ([]int64, error) {
	tried := make([]bool, len(p.servers))
	for _, i := range p.order(time.Now()) {
		s := p.servers[i]
		ids, err := p.callOn(s, args, want)
		if err == nil {
			s.backoff, s.downUntil, s.lastErr = 0, time.Time{}, ""
			if i != p.current {
				p.failovers.Add(1)
				p.current = i
			}
			return ids, nil
		}
		if p.ctx.Err() != nil {
			return nil, errClosed // a closed client fails over to nothing
		}
		if err := p.refusal(s, args, err); err != nil {
			return nil, err
		}
		tried[i] = true
		p.backOff(s, err)
	}
	each := make([]string, len(p.servers))
	for i, s := range p.servers {
		note := ""
		if !tried[i] {
			note = "; backing off"
		}
		each[i] = fmt.Sprintf("%s (%s%s)", s.name, s.lastErr, note)
	}
	return nil, errorf(ErrNoServer, "no sekka server could serve %s: %s",
		strings.Join(args, " "), strings.Join(each, ", "))
}

// soonestUp is when the first server's backoff runs out.
func (p *pool) soonestUp() time.Time {
	soonest := p.servers[0].downUntil
	for _, s := range p.servers {
		if s.downUntil.Before(soonest) {
			soonest = s.downUntil
		}
	}
	return soonest
}

// order lists the servers to try now, from the current one.
func (p *pool) order(now time.Time) []int {
	n := len(p.servers)
	up := make([]int, 0, n)
	soonest := p.current
	for k := 0; k < n; k++ {
		i := (p.current + k) % n
		if !p.servers[i].downUntil.After(now) {
			up = append(up, i)
		}
		if p.servers[i].downUntil.Before(p.servers[soonest].downUntil) {
			soonest = i
		}
	}
	if len(up) == 0 {
		up = append(up, soonest)
	}
	return up
}

// refusal is the error for the caller when err is not a reason to try another server: a
// refused token or a refused request. Nil otherwise.
func (p *pool) refusal(s *server, args []string, err error) error {
	if errors.Is(err, ErrAuth) {
		return err
	}
	var re *replyError
	if !errors.As(err, &re) || failoverReply(re.prefix) {
		return nil
	}
	if authReply(re.prefix) {
		return errorf(ErrAuth, "server %s refused the request: %s", s.name, re.msg)
	}
	return &RefusedError{Server: s.name, Command: strings.Join(args, " "), Reply: re.msg}
}

// backOff skips s for a while after it failed with err.
func (p *pool) backOff(s *server, err error) {
	s.lastErr = err.Error()
	p.serverErrors.Add(1)
	s.backoff = minDuration(p.backoffMax, maxDuration(p.backoffMin, 2*s.backoff))
	s.downUntil = time.Now().Add(s.backoff)
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
