// Command clientbench is the Go client's part of bench/run_clients.sh (docs/benchmarks.md,
// "Clients"): the cost of NextID from the buffer against one ID.NEXT round trip per id, and
// NextID latency while 4 goroutines draw 100,000 ids/s together for 3 s, measured as the
// other languages' benchmarks measure them. Needs a running server; prints one JSON line.
//
//	go run ./internal/clientbench 127.0.0.1:6380
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	"sekka.dev/go/sekka"
)

var ctx = context.Background()

// perIDFromBuffer times rounds of draws, each after a pause in which the refill completes, so
// that no timed call waits for the server (whose own ceiling would be measured instead).
func perIDFromBuffer(c *sekka.Client) float64 {
	const rounds, perRound = 40, 40_000
	var timed time.Duration
	for r := 0; r < rounds+10; r++ { // the first 10: the batch size grows
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		for i := 0; i < perRound; i++ {
			if _, err := c.NextID(ctx); err != nil {
				log.Fatal(err)
			}
		}
		if r >= 10 {
			timed += time.Since(start)
		}
	}
	return float64(timed.Nanoseconds()) / float64(rounds*perRound)
}

// perIDRoundTrip: one ID.NEXT per id on a plain connection (Go's standard library has no
// Redis client).
func perIDRoundTrip(address string) float64 {
	conn, err := net.Dial("tcp", address)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	in := bufio.NewReader(conn)
	command := []byte("*1\r\n$7\r\nID.NEXT\r\n")
	call := func() {
		if _, err := conn.Write(command); err != nil {
			log.Fatal(err)
		}
		line, err := in.ReadSlice('\n')
		if err != nil || line[0] != ':' {
			log.Fatalf("ID.NEXT: %q %v", line, err)
		}
	}
	for i := 0; i < 1000; i++ {
		call()
	}
	const n = 20_000
	start := time.Now()
	for i := 0; i < n; i++ {
		call()
	}
	return float64(time.Since(start).Nanoseconds()) / n
}

type load struct {
	IDs    int     `json:"ids"`
	IDsPS  float64 `json:"ids_per_s"`
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
}

// latencyUnderLoad: each goroutine draws rate/goroutines ids a second, paced in steps of 1 ms;
// every call timed.
func latencyUnderLoad(c *sekka.Client) load {
	const rate, goroutines, seconds = 100_000, 4, 3.0
	perMs := float64(rate) / goroutines / 1000
	samples := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	for k := range samples {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			start, done := time.Now(), 0
			for elapsed := time.Since(start); elapsed.Seconds() < seconds; elapsed = time.Since(start) {
				owed := int(float64(elapsed.Milliseconds())*perMs) - done // paced by the time passed
				for i := 0; i < owed; i++ {
					t0 := time.Now()
					if _, err := c.NextID(ctx); err != nil {
						log.Fatal(err)
					}
					samples[k] = append(samples[k], time.Since(t0))
				}
				if owed > 0 {
					done += owed
				}
				time.Sleep(500 * time.Microsecond)
			}
		}(k)
	}
	wg.Wait()
	var every []time.Duration
	for _, s := range samples {
		every = append(every, s...)
	}
	sort.Slice(every, func(i, j int) bool { return every[i] < every[j] })
	pick := func(q float64) float64 {
		i := int(q * float64(len(every)))
		if i >= len(every) {
			i = len(every) - 1
		}
		return float64(every[i].Nanoseconds()) / 1000
	}
	return load{IDs: len(every), IDsPS: float64(len(every)) / seconds, P50us: pick(0.50),
		P99us: pick(0.99), P999us: pick(0.999), MaxUs: float64(every[len(every)-1].Nanoseconds()) / 1000}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: clientbench host:port")
		os.Exit(2)
	}
	address := os.Args[1]
	c, err := sekka.New(sekka.Options{Servers: []string{address}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buffered := perIDFromBuffer(c)
	trip := perIDRoundTrip(address)
	under := latencyUnderLoad(c)
	out, _ := json.Marshal(map[string]any{
		"language": "go", "next_id_ns": buffered, "round_trip_ns": trip,
		"ratio": trip / buffered, "load": under, "stats": c.Stats()})
	fmt.Println(string(out))
}
