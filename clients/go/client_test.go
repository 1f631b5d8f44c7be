package sekka

// The client against real `sekka serve` processes (uniqueness, order, tags across a failover,
// a server killed while drawing, tokens, stale connections) and against scripted servers
// (a reply that drips, replies that break the protocol, a server's max batch, Close and
// contexts while a refill hangs).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var bg = context.Background()

func newClient(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func increasing(t *testing.T, what string, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			t.Fatalf("%s: %d then %d (at %d)", what, ids[i-1], ids[i], i)
		}
	}
}

func TestOptions(t *testing.T) {
	one := []string{"127.0.0.1:6380"}
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no servers", Options{}, "servers is empty"},
		{"not host:port", Options{Servers: []string{"127.0.0.1:6380", "x"}}, `servers[1] "x" is not host:port`},
		{"port 0", Options{Servers: []string{"127.0.0.1:0"}}, `servers[0] "127.0.0.1:0"`},
		{"port 65536", Options{Servers: []string{"127.0.0.1:65536"}}, `servers[0]`},
		{"a named port", Options{Servers: []string{"127.0.0.1:redis"}}, `servers[0]`},
		{"a signed port", Options{Servers: []string{"127.0.0.1:+80"}}, `servers[0]`},
		{"no host", Options{Servers: []string{":6380"}}, `servers[0] ":6380"`},
		{"v6 without brackets", Options{Servers: []string{"::1:6380"}}, `servers[0]`},
		{"a list in one item", Options{Servers: []string{"127.0.0.1:1,127.0.0.1:2"}}, `servers[0]`},
		{"negative Timeout", Options{Servers: one, Timeout: -time.Second}, "Timeout -1s is not valid"},
		{"negative ConnectTimeout", Options{Servers: one, ConnectTimeout: -1}, "ConnectTimeout"},
		{"negative Validity", Options{Servers: one, Validity: -1}, "Validity"},
		{"negative TargetRefill", Options{Servers: one, TargetRefill: -1}, "TargetRefill"},
		{"negative BackoffMin", Options{Servers: one, BackoffMin: -1}, "BackoffMin"},
		{"BackoffMax below BackoffMin", Options{Servers: one, BackoffMin: time.Second, BackoffMax: time.Millisecond}, "BackoffMax 1ms is not valid"},
		{"negative Batch", Options{Servers: one, Batch: -5}, "Batch -5 is not valid"},
		{"Batch below MinBatch", Options{Servers: one, Batch: 50}, "Batch 50 is not valid: allowed MinBatch (100) to MaxBatch (100000)"},
		{"Batch above MaxBatch", Options{Servers: one, MaxBatch: 500}, "Batch 1000 is not valid"},
		{"MinBatch above MaxBatch", Options{Servers: one, MinBatch: 300, Batch: 200, MaxBatch: 200}, "MinBatch 300 is not valid"},
		{"MaxBatch too large", Options{Servers: one, MaxBatch: 20_000_000}, "MaxBatch 20000000 is not valid"},
		{"LowWater 1", Options{Servers: one, LowWater: 1}, "LowWater 1 is not valid"},
		{"negative LowWater", Options{Servers: one, LowWater: -0.5}, "LowWater -0.5"},
		{"LowWater NaN", Options{Servers: one, LowWater: math.NaN()}, "LowWater NaN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.o)
			if err == nil {
				c.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "sekka: ") ||
				!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %q, want ErrInvalidArgument with %q", err, tc.want)
			}
		})
	}

	c := newClient(t, Options{Servers: []string{"127.0.0.1:6380", "[::1]:6381"}})
	if c.maxWait != 9*time.Second || c.batch != 1000 || c.minBatch != 100 ||
		c.maxBatch != 100_000 || c.lowWater != 0.5 || c.validity != 10*time.Second ||
		c.pool.backoffMin != 100*time.Millisecond || c.pool.backoffMax != 5*time.Second ||
		c.pool.servers[1].addr != "[::1]:6381" {
		t.Fatalf("defaults: %+v %+v", c, c.pool)
	}
}

func TestParseServers(t *testing.T) {
	got, err := ParseServers(" 127.0.0.1:6380 ,[::1]:6381")
	if err != nil || fmt.Sprint(got) != "[127.0.0.1:6380 [::1]:6381]" {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, bad := range []string{"", " ", "127.0.0.1:6380,", "127.0.0.1"} {
		if _, err := ParseServers(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseServers(%q): %v", bad, err)
		}
	}
}

func TestIDsFromOneServerAreUniqueAndIncrease(t *testing.T) {
	s := startServer(t, 7)
	c := newClient(t, Options{Servers: []string{s.addr}, Timeout: 5 * time.Second})
	const goroutines, each = 4, 25_000
	got := make([][]int64, goroutines)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := c.NextID(bg)
				if err != nil {
					errs <- err
					return
				}
				got[g] = append(got[g], id)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make(map[int64]bool)
	for g, ids := range got {
		increasing(t, fmt.Sprintf("goroutine %d", g), ids)
		for _, id := range ids {
			if seen[id] || workerOf(id) != 7 {
				t.Fatalf("id %d: repeated or not from worker 7", id)
			}
			seen[id] = true
		}
	}
	st := c.Stats()
	if st.Served != goroutines*each || st.Refills < 1 || st.Failovers != 0 || st.ServerErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNextIDs(t *testing.T) {
	s := startServer(t, 3)
	c := newClient(t, Options{Servers: []string{s.addr}, Timeout: 5 * time.Second})
	ids, err := c.NextIDs(bg, 2500) // more than a batch
	if err != nil || len(ids) != 2500 {
		t.Fatalf("got %d ids, %v", len(ids), err)
	}
	increasing(t, "NextIDs", ids)
	more, err := c.NextIDs(bg, 10)
	if err != nil || more[0] <= ids[len(ids)-1] {
		t.Fatalf("next: %v, %v", more, err)
	}
	if none, err := c.NextIDs(bg, 0); err != nil || len(none) != 0 {
		t.Fatalf("NextIDs(0): %v, %v", none, err)
	}
	if _, err := c.NextIDs(bg, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NextIDs(-1): %v", err)
	}
	if st := c.Stats(); st.Served != 2510 || st.Buffered == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTagsIncreaseAcrossAFailover(t *testing.T) {
	needServer(t)
	store := "sqlite:" + filepath.Join(t.TempDir(), "segments.db")
	createTag(t, store, "order", 50)
	a := startServer(t, 1, "--segment-store", store)
	b := startServer(t, 2, "--segment-store", store)
	fixed := Options{Batch: 20, MinBatch: 20, MaxBatch: 20, Timeout: 5 * time.Second}
	o := fixed
	o.Servers = []string{a.addr, b.addr}
	c := newClient(t, o)
	o.Servers = []string{b.addr}
	other := newClient(t, o) // b holds a range of its own, below a's later ones
	if id, err := other.Next(bg, "order"); err != nil || id <= 0 {
		t.Fatalf("other: %d, %v", id, err)
	}
	var ids []int64
	draw := func() {
		for i := 0; i < 300; i++ {
			id, err := c.Next(bg, "order")
			if err != nil {
				t.Fatalf("after %d ids: %v", len(ids), err)
			}
			ids = append(ids, id)
		}
	}
	draw()
	a.kill()
	draw()
	increasing(t, "tag order", ids)
	if st := c.Stats(); st.Failovers < 1 {
		t.Fatalf("stats %+v", st)
	}

	_, err := c.Next(bg, "no-such-tag")
	var refused *RefusedError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &refused) ||
		!strings.Contains(refused.Reply, "no-such-tag") || refused.Server != b.addr {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := c.Next(bg, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty tag: %v", err)
	}
}

func TestKillAServerWhileDrawing(t *testing.T) {
	a := startServer(t, 1)
	b := startServer(t, 2)
	const validity = 500 * time.Millisecond
	c := newClient(t, Options{Servers: []string{a.addr, b.addr}, Timeout: 2 * time.Second,
		Batch: 200, MinBatch: 200, MaxBatch: 200, Validity: validity})
	type drawn struct {
		at time.Time
		id int64
	}
	var mu sync.Mutex
	var got []drawn
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				id, err := c.NextID(bg)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, drawn{time.Now(), id})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	a.kill()
	time.Sleep(validity + 700*time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make(map[int64]bool)
	before, late := 0, 0
	for _, d := range got {
		if seen[d.id] {
			t.Fatalf("id %d twice", d.id)
		}
		seen[d.id] = true
		if d.at.Before(killed) && workerOf(d.id) == 1 {
			before++
		}
		if d.at.After(killed.Add(validity + 200*time.Millisecond)) {
			late++
			if workerOf(d.id) != 2 {
				t.Fatalf("id %d of the killed server's worker, %v after the kill", d.id, d.at.Sub(killed))
			}
		}
	}
	if before == 0 || late == 0 || c.Stats().Failovers < 1 {
		t.Fatalf("%d ids before the kill, %d late ones, stats %+v", before, late, c.Stats())
	}
}

func TestAWrongTokenFailsAtTheFirstCall(t *testing.T) {
	s := startServer(t, 1, "--auth-token", "right-token-0123456")
	servers := []string{s.addr}
	if _, err := newClient(t, Options{Servers: servers, Token: "right-token-0123456"}).NextID(bg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := newClient(t, Options{Servers: servers, Token: "wrong-token-0123456"}).NextID(bg)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "WRONGPASS") ||
		time.Since(start) > 2*time.Second {
		t.Fatalf("wrong token: %v after %v", err, time.Since(start))
	}
	if _, err := newClient(t, Options{Servers: servers}).NextID(bg); !errors.Is(err, ErrAuth) ||
		!strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("no token: %v", err)
	}
}

func TestNoServerNamesEachServer(t *testing.T) {
	a, b := freeAddr(t), freeAddr(t)
	c := newClient(t, Options{Servers: []string{a, b}, ConnectTimeout: 200 * time.Millisecond,
		Timeout: 200 * time.Millisecond})
	_, err := c.NextID(bg)
	msg := fmt.Sprint(err)
	if !errors.Is(err, ErrNoServer) || !strings.Contains(msg, "no sekka server could serve ID.BATCH 1000: ") ||
		!strings.Contains(msg, a+" (") || !strings.Contains(msg, b+" (") ||
		strings.Count(msg, "connection refused") != 2 {
		t.Fatalf("got %v", err)
	}
	// Both back off now: the one that comes back first is tried, the other named as backing off.
	_, err = c.NextID(bg)
	if !errors.Is(err, ErrNoServer) || !strings.Contains(fmt.Sprint(err), "; backing off)") {
		t.Fatalf("again: %v", err)
	}
	if st := c.Stats(); st.ServerErrors < 3 {
		t.Fatalf("stats %+v", st)
	}

	// A fresh connection that the server closes is an ordinary failure.
	closing := startScripted(t, func(*scriptedConn, []string) bool { return false })
	c = newClient(t, Options{Servers: []string{closing.addr}})
	if _, err := c.NextID(bg); !errors.Is(err, ErrNoServer) || c.Stats().ServerErrors != 1 {
		t.Fatalf("a closing server: %v, %+v", err, c.Stats())
	}
}

func TestCloseStopsEverything(t *testing.T) {
	s := startServer(t, 4)
	base := runtime.NumGoroutine()
	c, err := New(Options{Servers: []string{s.addr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextID(bg); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("a second Close:", err)
	}
	if _, err := c.NextID(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextID after Close: %v", err)
	}
	if _, err := c.NextIDs(bg, 3); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextIDs after Close: %v", err)
	}
	if _, err := c.Next(bg, "t"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > base; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before New:\n%s", runtime.NumGoroutine(), base,
				buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// silent is a scripted server that never answers ID.BATCH (AUTH and the rest get +OK).
func silent(t *testing.T) *scripted {
	return startScripted(t, func(sc *scriptedConn, args []string) bool {
		if args[0] != "ID.BATCH" {
			fmt.Fprint(sc, "+OK\r\n")
		}
		return true
	})
}

func TestCloseDuringARefill(t *testing.T) {
	mute := func(t *testing.T) *scripted {
		return startScripted(t, func(*scriptedConn, []string) bool { return true })
	}
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) *scripted
		token  string
	}{{"ID.BATCH unanswered", silent, ""}, {"AUTH unanswered", mute, "t"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.server(t)
			c, err := New(Options{Servers: []string{s.addr}, Token: tc.token, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := c.NextID(bg)
				errc <- err
			}()
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			c.Close()
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Close took %v", d)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("the waiting caller got %v", err)
				}
			case <-time.After(time.Second):
				t.Fatal("the waiting caller was not woken")
			}
			time.Sleep(100 * time.Millisecond)
			if n, _ := s.counts(); n != 1 {
				t.Fatalf("%d connections: one was made after Close", n)
			}
		})
	}
}

func TestContext(t *testing.T) {
	c := newClient(t, Options{Servers: []string{silent(t).addr}, Timeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.NextID(ctx); !errors.Is(err, context.DeadlineExceeded) ||
		time.Since(start) > time.Second {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
	done, cancel2 := context.WithCancel(bg)
	cancel2()
	if _, err := c.NextID(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("NextID: %v", err)
	}
	if _, err := c.NextIDs(done, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("NextIDs: %v", err)
	}
	if _, err := c.Next(done, "t"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v", err)
	}
}

func TestIdsExpireAfterTheValidity(t *testing.T) {
	ids := newIDSource()
	s := startScripted(t, func(sc *scriptedConn, args []string) bool {
		n, _ := strconv.Atoi(args[1])
		fmt.Fprint(sc, ids.reply(n))
		return true
	})
	c := newClient(t, Options{Servers: []string{s.addr}, Batch: 100, MinBatch: 100,
		MaxBatch: 100, Validity: 100 * time.Millisecond})
	first, err := c.NextID(bg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if st := c.Stats(); st.Dropped != 99 || st.Buffered != 0 {
		t.Fatalf("stats %+v", st)
	}
	if id, err := c.NextID(bg); err != nil || id != first+100 {
		t.Fatalf("after the validity: %d, %v (first %d)", id, err, first)
	}
}

func TestIdsMayComeAsBulkStrings(t *testing.T) {
	s := startScripted(t, func(sc *scriptedConn, args []string) bool {
		fmt.Fprint(sc, "*3\r\n$5\r\n12345\r\n:12346\r\n$19\r\n9223372036854775807\r\n")
		return true
	})
	c := newClient(t, Options{Servers: []string{s.addr}, Batch: 3, MinBatch: 3, MaxBatch: 3})
	if ids, err := c.NextIDs(bg, 3); err != nil || fmt.Sprint(ids) != "[12345 12346 9223372036854775807]" {
		t.Fatalf("got %v, %v", ids, err)
	}
}

// A tag's ids not above the highest the client gave are dropped; a refill that brings none
// is followed by another.
func TestATagsIdsNotAboveTheHighestAreDropped(t *testing.T) {
	starts := []int64{100, 90, 120}
	s := startScripted(t, func(sc *scriptedConn, args []string) bool {
		if args[0] != "SEG.NEXT" || args[1] != "t" || args[2] != "20" || sc.s.count() > len(starts) {
			fmt.Fprint(sc, "-ERR unexpected\r\n")
			return true
		}
		fmt.Fprint(sc, idsReply(starts[sc.s.count()-1], 20))
		return true
	})
	c := newClient(t, Options{Servers: []string{s.addr}, Batch: 20, MinBatch: 20, MaxBatch: 20,
		LowWater: 0.01})
	var ids []int64
	for i := 0; i < 21; i++ {
		id, err := c.Next(bg, "t")
		if err != nil {
			t.Fatalf("after %v: %v", ids, err)
		}
		ids = append(ids, id)
	}
	if ids[0] != 100 || ids[19] != 119 || ids[20] != 120 {
		t.Fatalf("ids %v", ids)
	}
	if st := c.Stats(); st.Dropped != 20 || st.Refills != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// A connection the server closed while idle is replaced, and the command sent again: not a
// server failure.
func TestAConnectionClosedWhileIdleIsReplaced(t *testing.T) {
	s := startServer(t, 6, "--idle-timeout", "1s")
	// LowWater 0.01: each batch is used up before the next refill starts, and that refill
	// meets the connection the server closed.
	c := newClient(t, Options{Servers: []string{s.addr}, Batch: 20, MinBatch: 20, MaxBatch: 20,
		LowWater: 0.01, Validity: time.Minute})
	for round := 0; round < 3; round++ {
		if round > 0 {
			time.Sleep(1500 * time.Millisecond) // past the idle timeout
		}
		for i := 0; i < 20; i++ {
			if id, err := c.NextID(bg); err != nil || workerOf(id) != 6 {
				t.Fatalf("round %d: %d, %v", round, id, err)
			}
		}
	}
	if st := c.Stats(); st.ServerErrors != 0 || st.Failovers != 0 || st.Refills < 3 {
		t.Fatalf("stats %+v", st)
	}
}

// The same with a scripted server that closes each connection after one reply.
func TestAConnectionClosedAfterAReplyIsReplaced(t *testing.T) {
	source := newIDSource()
	s := startScripted(t, func(sc *scriptedConn, args []string) bool {
		n, _ := strconv.Atoi(args[1])
		fmt.Fprint(sc, source.reply(n))
		return false
	})
	c := newClient(t, Options{Servers: []string{s.addr}, Batch: 20, MinBatch: 20, MaxBatch: 20,
		LowWater: 0.01})
	ids, err := c.NextIDs(bg, 100)
	if err != nil {
		t.Fatal(err)
	}
	increasing(t, "ids", ids)
	conns, _ := s.counts()
	if st := c.Stats(); st.ServerErrors != 0 || conns < 5 {
		t.Fatalf("stats %+v, %d connections", st, conns)
	}
}

// A server that drips its reply one byte every 0.5 s is abandoned after the timeout: the
// deadline holds for the whole command, not for each read.
func TestADrippingServerIsAbandonedAfterTheTimeout(t *testing.T) {
	b := startServer(t, 2)
	drip := startScripted(t, func(sc *scriptedConn, args []string) bool {
		n, _ := strconv.Atoi(args[1])
		reply := idsReply(1<<40, n)
		for i := 0; i < len(reply); i++ {
			if _, err := sc.Write([]byte{reply[i]}); err != nil || !sc.sleep(500*time.Millisecond) {
				return false
			}
		}
		return true
	})
	c := newClient(t, Options{Servers: []string{drip.addr, b.addr}, Timeout: time.Second})
	start := time.Now()
	id, err := c.NextID(bg)
	took := time.Since(start)
	if err != nil || workerOf(id) != 2 || took < 900*time.Millisecond || took > 2500*time.Millisecond {
		t.Fatalf("got %d, %v after %v", id, err, took)
	}
	if st := c.Stats(); st.Failovers != 1 || st.ServerErrors != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A reply that is not what was expected is a protocol error: the connection is dropped and
// the next server tried.
func TestRepliesThatBreakTheProtocol(t *testing.T) {
	b := startServer(t, 2)
	cases := []struct{ name, reply, want string }{
		{"an error inside an array", "*2\r\n:1\r\n-ERR x\r\n", "an error inside an array: ERR x"},
		{"a word inside an array", "*2\r\n:1\r\n$3\r\nabc\r\n", `a bulk string "abc\r\n"`},
		{"a float inside an array", "*2\r\n:1\r\n:2.5\r\n", `an integer reply "2.5"`},
		{"an integer out of range", "*2\r\n:1\r\n:9223372036854775808\r\n", "an integer reply"},
		{"a short array", "*1\r\n:5\r\n", `an array of "1" elements where 2 ids were expected`},
		{"a nil array", "*-1\r\n", `an array of "-1" elements`},
		{"a simple string", "+OK\r\n", "a reply starting with '+'"},
		{"garbage", "?what\r\n", "a reply starting with '?'"},
		{"a line without CR", "*2\n", "a reply line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := startScripted(t, func(sc *scriptedConn, args []string) bool {
				fmt.Fprint(sc, tc.reply)
				return true
			})
			fixed := Options{Batch: 2, MinBatch: 2, MaxBatch: 2, Timeout: 5 * time.Second}
			alone := fixed
			alone.Servers = []string{bad.addr}
			_, err := newClient(t, alone).NextID(bg)
			if !errors.Is(err, ErrNoServer) || !strings.Contains(fmt.Sprint(err), "protocol error: "+tc.want) {
				t.Fatalf("alone: %v", err)
			}
			both := fixed
			both.Servers = []string{bad.addr, b.addr}
			c := newClient(t, both)
			if id, err := c.NextID(bg); err != nil || workerOf(id) != 2 {
				t.Fatalf("with a good server: %d, %v", id, err)
			}
			if st := c.Stats(); st.Failovers != 1 || st.ServerErrors != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A batch refused with "allowed 1 to M" teaches the client the server's max batch.
func TestTheServersMaxBatchIsLearned(t *testing.T) {
	source := newIDSource()
	s := startScripted(t, func(sc *scriptedConn, args []string) bool {
		n, _ := strconv.Atoi(args[1])
		if n > 1000 {
			fmt.Fprintf(sc, "-ERR count \"%d\" is not valid: allowed 1 to 1000\r\n", n)
			return true
		}
		fmt.Fprint(sc, source.reply(n))
		return true
	})
	c := newClient(t, Options{Servers: []string{s.addr}, Batch: 5000, MinBatch: 5000, MaxBatch: 100_000})
	ids, err := c.NextIDs(bg, 3000)
	if err != nil {
		t.Fatal(err)
	}
	increasing(t, "ids", ids)
	_, commands := s.counts()
	if len(commands) < 4 || commands[0] != "[ID.BATCH 5000]" || commands[1] != "[ID.BATCH 1000]" {
		t.Fatalf("commands %q", commands)
	}
	for _, cmd := range commands[1:] {
		if cmd != "[ID.BATCH 1000]" {
			t.Fatalf("after learning the max: %q", commands)
		}
	}
	if st := c.Stats(); st.ServerErrors != 0 || st.Failovers != 0 {
		t.Fatalf("stats %+v", st)
	}

	real := startServer(t, 5, "--max-batch", "1000")
	c = newClient(t, Options{Servers: []string{real.addr}, Batch: 5000, MinBatch: 5000,
		MaxBatch: 100_000, Timeout: 5 * time.Second})
	if ids, err := c.NextIDs(bg, 3000); err != nil || len(ids) != 3000 {
		t.Fatalf("the real server: %d ids, %v", len(ids), err)
	}
}
