package sekka

import (
	"context"
	"crypto/tls"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Client. A zero field takes its default; a negative or out-of-range one
// is refused by New.
type Options struct {
	// Servers are the servers' RESP listeners, "host:port" or "[v6]:port", tried in this
	// order. At least one.
	Servers []string
	// Token is the servers' server.auth_token, sent with AUTH on each new connection ("" =
	// none).
	Token string
	// ConnectTimeout bounds each connect, name resolution included (default 1 s).
	ConnectTimeout time.Duration
	// Timeout bounds each command, from sending it to the last byte of its reply (default
	// 1 s).
	Timeout time.Duration
	// Batch is the first batch size (default 1000); it adapts between MinBatch (default 100)
	// and MaxBatch (default 100,000, the server's server.max_batch) so that a batch lasts
	// about TargetRefill (default 1 s): a batch that lasted less than half of it doubles the
	// next one, one that lasted over twice as long halves it. A server that refuses a batch
	// with "allowed 1 to M" caps them at M for the client's life.
	Batch, MinBatch, MaxBatch int
	// TargetRefill is how long a batch should last (default 1 s); see Batch.
	TargetRefill time.Duration
	// LowWater: a refill starts when fewer than this share of a batch is left (default 0.5;
	// above 0 and below 1).
	LowWater float64
	// Validity: ids buffered longer are dropped unused (default 10 s), so ids stay roughly
	// time-ordered and a server that died does not speak through its ids long after.
	Validity time.Duration
	// BackoffMin and BackoffMax: a failed server is skipped for BackoffMin (default 100 ms),
	// doubling up to BackoffMax (default 5 s) while it keeps failing.
	BackoffMin, BackoffMax time.Duration
	// StrictWait: how long a strict call tries the servers, again and again, before it
	// returns ErrNoServer (default 30 s; a strict tag's leader failover takes the servers'
	// worker.lease_ttl and a few seconds).
	StrictWait time.Duration
	// TLS, when set, makes every connection TLS with this configuration (the server name is
	// the server's host when ServerName is empty); nil = plain TCP. TLSFiles makes one from
	// PEM files. The handshake is part of the connect and bounded by ConnectTimeout.
	TLS *tls.Config
}

// maxBatchLimit is the largest MaxBatch allowed: the server's own limit for server.max_batch.
const maxBatchLimit = 10_000_000

// maxOption is the longest any time option may be: a day (the wait bound, twice the
// timeouts per server, stays far from overflowing).
const maxOption = 24 * time.Hour

// Client hands out ids from a local buffer that one background goroutine refills from the
// servers. It is safe for use by many goroutines. Close it to stop the goroutine.
type Client struct {
	pool       *pool
	strict     *pool         // strict calls' own connections (a strict id is never buffered)
	strictTurn chan struct{} // (one slot) strict calls take turns on them
	strictWait time.Duration
	maxWait    time.Duration // a caller with an empty buffer waits at most this long
	lowWater   float64
	target     time.Duration
	validity   time.Duration
	retryAfter time.Duration // a failed refill is not asked again by the low-water mark sooner

	mu       sync.Mutex // guards the fields below it, and the streams
	minBatch int        // lowered with maxBatch when a server tells its limit
	maxBatch int
	batch    int
	ids      *stream
	tags     map[string]*stream
	streams  []*stream // ids first, then the tags in order of first use
	closed   bool
	served   uint64
	refills  uint64
	dropped  uint64

	wake      chan struct{} // (buffered) a stream wants a refill
	done      chan struct{} // closed by Close
	exited    chan struct{} // closed when the refill goroutine has ended
	closeOnce sync.Once
}

// Stats are the client's counters.
type Stats struct {
	Served       uint64 // ids handed out from the buffer
	Refills      uint64 // batches fetched
	Failovers    uint64 // moves to another server
	ServerErrors uint64 // calls a server failed (it was then backed off)
	Buffered     uint64 // ids in the buffers now
	Dropped      uint64 // ids dropped: expired, or not above a tag's highest
}

// batch is one reply's ids, handed out from pos on until its timer expires it (a timer rather
// than a clock read per id: reading the clock would cost more than the rest of a call).
type batch struct {
	ids   []int64
	pos   int
	timer *time.Timer
}

// stream is the buffer of one id source: snowflake ids, or one segment tag.
type stream struct {
	tag        string // "" for snowflake ids
	size       int    // the next batch's size
	batches    []*batch
	left       int  // ids in batches not handed out yet
	wanted     bool // a refill is asked for
	busy       bool // the refill goroutine is fetching for it
	attempts   uint64
	err        error     // the last refill's failure; nil after a success
	retryAt    time.Time // no refill by the low-water mark before this (after a failure)
	high       int64     // tags: the highest id queued or handed out
	lastRefill time.Time
	changed    chan struct{} // closed (and replaced) when a refill ends
}

// New checks the options and starts the refill goroutine; it connects to no server (the
// first call does). Errors wrap ErrInvalidArgument and name the option.
func New(o Options) (*Client, error) {
	addrs, err := o.check()
	if err != nil {
		return nil, err
	}
	c := &Client{
		pool:       newPool(&o, addrs),
		strict:     newPool(&o, addrs),
		strictTurn: make(chan struct{}, 1),
		strictWait: o.StrictWait,
		maxWait:    2*(o.ConnectTimeout+o.Timeout)*time.Duration(len(o.Servers)) + time.Second,
		lowWater:   o.LowWater,
		target:     o.TargetRefill,
		validity:   o.Validity,
		retryAfter: o.BackoffMin,
		minBatch:   o.MinBatch,
		maxBatch:   o.MaxBatch,
		batch:      o.Batch,
		tags:       make(map[string]*stream),
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		exited:     make(chan struct{}),
	}
	c.ids = c.newStream("")
	go c.refillLoop()
	return c, nil
}

// ParseServers splits "host:port,host:port" into the servers for Options.Servers, checking
// each (spaces around an item are ignored). Errors wrap ErrInvalidArgument.
func ParseServers(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errorf(ErrInvalidArgument, "servers is empty: give at least one host:port")
	}
	items := strings.Split(list, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
		if _, err := parseServer(i, items[i]); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// check fills in the defaults and refuses what is out of range; it returns the addresses to
// dial.
func (o *Options) check() ([]string, error) {
	if len(o.Servers) == 0 {
		return nil, errorf(ErrInvalidArgument, "servers is empty: give at least one host:port")
	}
	addrs := make([]string, len(o.Servers))
	for i, s := range o.Servers {
		a, err := parseServer(i, s)
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{
		{"ConnectTimeout", &o.ConnectTimeout, time.Second},
		{"Timeout", &o.Timeout, time.Second},
		{"TargetRefill", &o.TargetRefill, time.Second},
		{"Validity", &o.Validity, 10 * time.Second},
		{"BackoffMin", &o.BackoffMin, 100 * time.Millisecond},
		{"BackoffMax", &o.BackoffMax, 5 * time.Second},
		{"StrictWait", &o.StrictWait, 30 * time.Second},
	} {
		if *d.value < 0 || *d.value > maxOption {
			return nil, errorf(ErrInvalidArgument, "%s %v is not valid: allowed above 0 and at most %v (0 = the default, %v)", d.name, *d.value, maxOption, d.def)
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	if o.BackoffMax < o.BackoffMin {
		return nil, errorf(ErrInvalidArgument, "BackoffMax %v is not valid: allowed BackoffMin (%v) or more", o.BackoffMax, o.BackoffMin)
	}
	if err := o.checkBatches(); err != nil {
		return nil, err
	}
	if o.LowWater == 0 {
		o.LowWater = 0.5
	}
	if !(o.LowWater > 0 && o.LowWater < 1) {
		return nil, errorf(ErrInvalidArgument, "LowWater %v is not valid: allowed above 0 and below 1 (0 = the default, 0.5)", o.LowWater)
	}
	return addrs, nil
}

func (o *Options) checkBatches() error {
	for _, b := range []struct {
		name  string
		value *int
		def   int
	}{{"Batch", &o.Batch, 1000}, {"MinBatch", &o.MinBatch, 100}, {"MaxBatch", &o.MaxBatch, 100_000}} {
		if *b.value < 0 {
			return errorf(ErrInvalidArgument, "%s %d is not valid: allowed 1 or more (0 = the default, %d)", b.name, *b.value, b.def)
		}
		if *b.value == 0 {
			*b.value = b.def
		}
	}
	switch {
	case o.MaxBatch > maxBatchLimit:
		return errorf(ErrInvalidArgument, "MaxBatch %d is not valid: allowed 1 to %d", o.MaxBatch, maxBatchLimit)
	case o.MinBatch > o.MaxBatch:
		return errorf(ErrInvalidArgument, "MinBatch %d is not valid: allowed 1 to MaxBatch (%d)", o.MinBatch, o.MaxBatch)
	case o.Batch < o.MinBatch || o.Batch > o.MaxBatch:
		return errorf(ErrInvalidArgument, "Batch %d is not valid: allowed MinBatch (%d) to MaxBatch (%d)", o.Batch, o.MinBatch, o.MaxBatch)
	}
	return nil
}

// NextID returns the next snowflake id. From the buffer it costs no network; with the buffer
// empty it waits for a refill, at most until ctx ends (ctx.Err()) or the wait bound passes
// (ErrNoServer). Errors: ErrNoServer, ErrAuth, ErrRefused, ErrClosed, ctx.Err().
func (c *Client) NextID(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.take(ctx, c.ids)
}

// NextIDs returns n snowflake ids in the order they were served; on an error, none (the ids
// drawn are lost). Errors: as NextID, and ErrInvalidArgument for a negative n.
func (c *Client) NextIDs(ctx context.Context, n int) ([]int64, error) {
	if n < 0 {
		return nil, errorf(ErrInvalidArgument, "NextIDs(%d): allowed 0 or more", n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]int64, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for got := 0; got < n; {
		if c.closed {
			return nil, errClosed
		}
		if k := c.pop(c.ids, out[got:]); k > 0 {
			got += k
			continue
		}
		v, err := c.wait(ctx, c.ids)
		if err != nil {
			return nil, err
		}
		out[got] = v
		got++
	}
	return out, nil
}

// Next returns the next id of segment tag `tag`, above every id this client gave for it.
// Errors: as NextID (an unknown tag is ErrRefused, naming it), ErrInvalidArgument for "".
func (c *Client) Next(ctx context.Context, tag string) (int64, error) {
	if tag == "" {
		return 0, errorf(ErrInvalidArgument, "Next(\"\"): the tag is empty")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.tags[tag]
	if s == nil {
		s = c.newStream(tag)
	}
	return c.take(ctx, s)
}

// Strict returns the next strict id of tag (docs/contract.md section 15): larger than every id
// of the tag that any client of the cluster got before this call began. Errors: as StrictBatch.
func (c *Client) Strict(ctx context.Context, tag string) (int64, error) {
	ids, err := c.StrictBatch(ctx, tag, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// StrictBatch returns n consecutive strict ids of tag, larger than every id of the tag that
// any client got before this call began. One request, never buffered, on connections of its
// own (a client's strict calls take turns): on a connection error, a timeout or an
// -UNAVAILABLE (a leader failover) the servers are tried again, in turn and with their
// backoff, until StrictWait passes (ErrNoServer; the wait for the turn counts) or ctx ends
// (ctx.Err(), checked while waiting for the turn and between attempts). Errors: ErrInvalidArgument (an empty tag, n outside 1 to 10,000,000),
// ErrNoServer, ErrAuth, ErrRefused, ErrClosed, ctx.Err().
func (c *Client) StrictBatch(ctx context.Context, tag string, n int) ([]int64, error) {
	if tag == "" {
		return nil, errorf(ErrInvalidArgument, "StrictBatch(\"\", %d): the tag is empty", n)
	}
	if n < 1 || n > maxBatchLimit {
		return nil, errorf(ErrInvalidArgument, "StrictBatch(%q, %d): allowed 1 to %d ids", tag, n, maxBatchLimit)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(c.strictWait)
	if err := c.takeStrictTurn(ctx, deadline); err != nil {
		return nil, err
	}
	defer func() { <-c.strictTurn }()
	args := []string{"STRICT.BATCH", tag, strconv.Itoa(n)}
	for {
		select {
		case <-c.done:
			return nil, errClosed
		default:
		}
		ids, err := c.strict.call(args, n)
		if err == nil {
			if ids[n-1]-ids[0] != int64(n-1) {
				return nil, errorf(ErrRefused, "the ids of %s are not consecutive: %d to %d",
					strings.Join(args, " "), ids[0], ids[n-1])
			}
			return ids, nil
		}
		if !errors.Is(err, ErrNoServer) {
			return nil, err
		}
		up := c.strict.soonestUp()
		if !up.Before(deadline) {
			return nil, errorf(ErrNoServer, "no strict ids within %v: %v", c.strictWait, err)
		}
		if err := c.pause(ctx, time.Until(up)); err != nil {
			return nil, err
		}
	}
}

// takeStrictTurn waits for the strict connections until deadline (ErrNoServer), Close
// (errClosed) or the end of ctx.
func (c *Client) takeStrictTurn(ctx context.Context, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case c.strictTurn <- struct{}{}:
		return nil
	case <-timer.C:
		return errorf(ErrNoServer, "no strict ids within %v: the client's other strict calls held its connections", c.strictWait)
	case <-c.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pause sleeps for d; it returns errClosed at Close, or ctx.Err() when ctx ends first.
func (c *Client) pause(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-c.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		Served:       c.served,
		Refills:      c.refills,
		Failovers:    c.pool.failovers.Load() + c.strict.failovers.Load(),
		ServerErrors: c.pool.serverErrors.Load() + c.strict.serverErrors.Load(),
		Dropped:      c.dropped,
	}
	for _, s := range c.streams {
		st.Buffered += uint64(s.left)
	}
	return st
}

// Close stops the refill goroutine (ending a network call in progress), closes every
// connection and wakes waiting callers with ErrClosed; it returns when the goroutine has
// ended. Later calls return ErrClosed. Close may be called more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		close(c.done)
		for _, s := range c.streams {
			for _, b := range s.batches {
				b.timer.Stop()
			}
		}
		c.mu.Unlock()
		c.pool.close()
		c.strict.close()
	})
	<-c.exited
	return nil
}

// The buffer. The methods from here to the refill goroutine's REQUIRE c.mu held (wait
// releases it while it waits).

func (c *Client) newStream(tag string) *stream {
	s := &stream{tag: tag, size: c.batch, high: math.MinInt64, changed: make(chan struct{})}
	if tag != "" {
		c.tags[tag] = s
	}
	c.streams = append(c.streams, s)
	return s
}

// take hands out one id of s, waiting for a refill when the buffer is empty.
func (c *Client) take(ctx context.Context, s *stream) (int64, error) {
	if c.closed {
		return 0, errClosed
	}
	var one [1]int64
	if c.pop(s, one[:]) == 1 {
		return one[0], nil
	}
	return c.wait(ctx, s)
}

// pop moves up to len(dst) ids from s's oldest batch with ids into dst and returns how many,
// and asks for a refill at the low-water mark.
func (c *Client) pop(s *stream, dst []int64) int {
	for len(s.batches) > 0 {
		b := s.batches[0]
		if b.pos < len(b.ids) {
			break
		}
		b.timer.Stop()
		s.batches[0] = nil
		s.batches = s.batches[1:]
	}
	k := 0
	if len(s.batches) > 0 {
		b := s.batches[0]
		k = copy(dst, b.ids[b.pos:])
		b.pos += k
		s.left -= k
		c.served += uint64(k)
	}
	if float64(s.left) < c.lowWater*float64(s.size) && !s.wanted && !s.busy &&
		!time.Now().Before(s.retryAt) {
		c.want(s)
	}
	return k
}

func (c *Client) want(s *stream) {
	s.wanted = true
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// wait waits, with c.mu released, for a refill of s to bring an id. It returns the first
// refill failure that ended after it began; it gives up when ctx ends, the client closes, or
// no id came within maxWait.
func (c *Client) wait(ctx context.Context, s *stream) (int64, error) {
	start := s.attempts
	timer := time.NewTimer(c.maxWait)
	defer timer.Stop()
	var one [1]int64
	for {
		if !s.wanted && !s.busy {
			c.want(s) // the low-water mark's retry delay does not hold for a waiting caller
		}
		changed := s.changed
		c.mu.Unlock()
		var err error
		select {
		case <-changed:
		case <-c.done:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timer.C:
			err = errorf(ErrNoServer, "no ids within %v from %s", c.maxWait, c.pool.names())
		}
		c.mu.Lock()
		if c.closed {
			return 0, errClosed
		}
		if err != nil {
			return 0, err
		}
		if c.pop(s, one[:]) == 1 {
			return one[0], nil
		}
		if s.attempts > start {
			if s.err != nil {
				return 0, s.err
			}
			start = s.attempts // a refill with nothing usable: ask again
		}
	}
}

// The refill goroutine.

func (c *Client) refillLoop() {
	defer close(c.exited)
	for {
		s, n, ok := c.nextWanted()
		if !ok {
			return
		}
		ids, err := c.fetch(s, n)
		c.finish(s, ids, err)
	}
}

// nextWanted waits for a stream that wants a refill, marks it busy and returns the batch
// size to ask for; false once the client is closed.
func (c *Client) nextWanted() (*stream, int, bool) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, 0, false
		}
		for _, s := range c.streams {
			if s.wanted {
				s.wanted, s.busy = false, true
				c.adapt(s, time.Now())
				n := s.size
				c.mu.Unlock()
				return s, n, true
			}
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-c.done:
		}
	}
}

// adapt sizes s's next batch by Leaf's rule: the last one lasted less than half of the target
// (double it) or more than twice the target (halve it). REQUIRES: c.mu held.
func (c *Client) adapt(s *stream, now time.Time) {
	if s.lastRefill.IsZero() {
		return
	}
	switch lasted := now.Sub(s.lastRefill); {
	case lasted < c.target/2:
		s.size = minInt(c.maxBatch, 2*s.size)
	case lasted > 2*c.target:
		s.size = maxInt(c.minBatch, s.size/2)
	}
}

// fetch asks the servers for n ids of s. A server that allows fewer ids per command (its
// reply ends in "allowed 1 to M") teaches the client its limit, and the command is sent again
// at once with M: neither a failover nor an error for the caller.
func (c *Client) fetch(s *stream, n int) ([]int64, error) {
	for {
		args := []string{"ID.BATCH", strconv.Itoa(n)}
		if s.tag != "" {
			args = []string{"SEG.NEXT", s.tag, strconv.Itoa(n)}
		}
		ids, err := c.pool.call(args, n)
		m, ok := serverMaxBatch(err)
		if !ok || m >= n {
			return ids, err
		}
		n = c.learnMaxBatch(m)
	}
}

// serverMaxBatch reads M from a refusal "ERR ... allowed 1 to M".
func serverMaxBatch(err error) (int, bool) {
	r, ok := err.(*RefusedError)
	if !ok || !strings.HasPrefix(r.Reply, "ERR ") {
		return 0, false
	}
	i := strings.LastIndex(r.Reply, "allowed 1 to ")
	if i < 0 {
		return 0, false
	}
	m, perr := strconv.Atoi(r.Reply[i+len("allowed 1 to "):])
	return m, perr == nil && m >= 1
}

// learnMaxBatch caps every batch size at m, the servers' limit, for the client's life.
func (c *Client) learnMaxBatch(m int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxBatch = minInt(c.maxBatch, m)
	c.minBatch = minInt(c.minBatch, m)
	c.batch = minInt(c.batch, m)
	for _, s := range c.streams {
		s.size = minInt(s.size, m)
	}
	return m
}

// finish records a refill's outcome and wakes s's waiting callers.
func (c *Client) finish(s *stream, ids []int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.busy = false
	s.attempts++
	s.err = err
	if err != nil {
		s.retryAt = time.Now().Add(c.retryAfter)
	} else {
		c.refills++
		s.lastRefill = time.Now()
		c.add(s, ids)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// add queues a batch. A tag's ids stay increasing within the client: after a failover another
// server's range may be below ids already given, so ids not above the highest are dropped.
// Snowflake ids are kept as served. REQUIRES: c.mu held.
func (c *Client) add(s *stream, ids []int64) {
	if s.tag != "" {
		fresh := ids[:0]
		for _, id := range ids {
			if id > s.high {
				fresh = append(fresh, id)
				s.high = id
			}
		}
		c.dropped += uint64(len(ids) - len(fresh))
		ids = fresh
	}
	if len(ids) == 0 {
		return
	}
	b := &batch{ids: ids}
	b.timer = time.AfterFunc(c.validity, func() { c.expire(s, b) })
	s.batches = append(s.batches, b)
	s.left += len(ids)
}

// expire (b's timer) drops the ids of b not handed out within the validity.
func (c *Client) expire(s *stream, b *batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	unused := len(b.ids) - b.pos
	b.pos = len(b.ids)
	s.left -= unused
	c.dropped += uint64(unused)
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
