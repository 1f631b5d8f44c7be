package sekka

import (
	"testing"
	"time"
)

// BenchmarkNextID: an id from the buffer. Calls are timed in rounds of 100,000, each after a
// pause (not timed) in which the background refill completes, so that no timed call waits for
// the server, whose own ceiling of 4.1 M ids/s per worker would be measured instead
// (BenchmarkNextIDSustained). That ceiling makes the wall time about 10 times the timed one.
func BenchmarkNextID(b *testing.B) {
	const round = 100_000
	s := startServer(b, 9)
	// Batches of 100,000 refilled below 90,000: up to 190,000 buffered, enough for a round.
	c := newClient(b, Options{Servers: []string{s.addr}, Timeout: 5 * time.Second,
		Batch: 100_000, MinBatch: 100_000, MaxBatch: 100_000, LowWater: 0.9, Validity: time.Minute})
	b.ReportAllocs()
	for done := 0; done < b.N; done += round {
		b.StopTimer()
		refilled(b, c, round)
		b.StartTimer()
		for i := 0; i < round && done+i < b.N; i++ {
			if _, err := c.NextID(bg); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// refilled waits until c buffers at least n snowflake ids and no refill is running, drawing
// ids (untimed) down to the low-water mark when none is.
func refilled(b *testing.B, c *Client, n int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		left, idle := c.ids.left, !c.ids.busy && !c.ids.wanted
		c.mu.Unlock()
		switch {
		case idle && left >= n:
			return
		case time.Now().After(deadline):
			b.Fatalf("no %d ids buffered within 10 s: %+v", n, c.Stats())
		case idle:
			if _, err := c.NextID(bg); err != nil { // down to the low-water mark
				b.Fatal(err)
			}
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// BenchmarkNextIDSustained: ids from the buffer with no pause, so that calls wait for refills
// when they outrun the server: the server's ceiling (4.1 M ids/s per worker) as much as the
// client's cost.
func BenchmarkNextIDSustained(b *testing.B) {
	s := startServer(b, 9)
	c := newClient(b, Options{Servers: []string{s.addr}, Timeout: 5 * time.Second})
	if _, err := c.NextID(bg); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.NextID(bg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip: one ID.NEXT round trip per op on a raw connection, what a call costs
// without the buffer.
func BenchmarkRoundTrip(b *testing.B) {
	s := startServer(b, 9)
	cn, err := dial(bg, s.addr, nil, time.Second, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer cn.close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cn.integer("ID.NEXT"); err != nil {
			b.Fatal(err)
		}
	}
}
