// The conformance driver of the Go client (tests/conformance/PROTOCOL.md): one JSON request
// per line on stdin, one JSON reply per line on stdout, flushed after each; requests are
// handled one at a time, in order. Stderr is free for logs.
//
//	printf '{"op":"open","servers":"127.0.0.1:6380","options":{}}\n{"op":"ids","n":3}\n' |
//	  go run ./internal/conformancedriver
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"sekka.dev/go/sekka"
)

type request struct {
	Op      string                     `json:"op"`
	Servers string                     `json:"servers"`
	Options map[string]json.RawMessage `json:"options"`
	N       int                        `json:"n"`
	Tag     string                     `json:"tag"`
}

// reply is one line out; "ms" is added to every reply.
type reply map[string]any

// driverError is a fault of the request or of the driver, not of the client: kind
// "other:driver".
type driverError struct{ msg string }

func (e *driverError) Error() string { return e.msg }

func main() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out) // one line per reply
	enc.SetEscapeHTML(false)
	d := &driver{}
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			start := time.Now()
			r, exit := d.handle(line)
			r["ms"] = float64(time.Since(start).Nanoseconds()) / 1e6
			if err := enc.Encode(r); err != nil {
				fmt.Fprintln(out, `{"error":"other:driver","message":"cannot encode the reply"}`)
			}
			out.Flush()
			if exit {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				fmt.Fprintln(os.Stderr, "conformancedriver: stdin:", err)
			}
			return
		}
	}
}

type driver struct {
	client *sekka.Client
}

// handle runs one request; true after "exit".
func (d *driver) handle(line []byte) (reply, bool) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return failure(&driverError{fmt.Sprintf("a request that is not JSON: %v", err)}), false
	}
	ctx := context.Background()
	switch req.Op {
	case "open":
		return d.open(req), false
	case "close":
		if d.client != nil {
			d.client.Close()
		}
		return reply{"ok": true}, false
	case "exit":
		return reply{"ok": true}, true
	}
	if d.client == nil {
		return failure(&driverError{fmt.Sprintf("%q before open", req.Op)}), false
	}
	switch req.Op {
	case "ids":
		return repeat(req.N, func() (int64, error) { return d.client.NextID(ctx) }), false
	case "tag":
		return repeat(req.N, func() (int64, error) { return d.client.Next(ctx, req.Tag) }), false
	case "strict":
		return repeat(req.N, func() (int64, error) { return d.client.Strict(ctx, req.Tag) }), false
	case "strict_batch":
		ids, err := d.client.StrictBatch(ctx, req.Tag, req.N)
		if err != nil {
			return failure(err), false
		}
		return reply{"ids": decimal(ids)}, false
	case "batch":
		ids, err := d.client.NextIDs(ctx, req.N)
		if err != nil {
			return failure(err), false
		}
		return reply{"ids": decimal(ids)}, false
	case "stats":
		st := d.client.Stats()
		return reply{"stats": map[string]uint64{"served": st.Served, "refills": st.Refills,
			"failovers": st.Failovers, "buffered": st.Buffered, "dropped": st.Dropped}}, false
	}
	return failure(&driverError{fmt.Sprintf("unknown op %q", req.Op)}), false
}

func (d *driver) open(req request) reply {
	if d.client != nil { // a second open: the first client must not linger
		d.client.Close()
		d.client = nil
	}
	servers, err := sekka.ParseServers(req.Servers)
	if err != nil {
		return failure(err)
	}
	o, err := options(req.Options)
	if err != nil {
		return failure(err)
	}
	o.Servers = servers
	c, err := sekka.New(o)
	if err != nil {
		return failure(err)
	}
	d.client = c
	return reply{"ok": true}
}

// repeat makes n calls of next; an error reply holds the ids got before the failing call.
func repeat(n int, next func() (int64, error)) reply {
	ids := []int64{}
	for i := 0; i < n; i++ {
		id, err := next()
		if err != nil {
			r := failure(err)
			r["ids"] = decimal(ids)
			return r
		}
		ids = append(ids, id)
	}
	return reply{"ids": decimal(ids)}
}

func decimal(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

func failure(err error) reply {
	return reply{"error": kind(err), "message": err.Error()}
}

func kind(err error) string {
	var de *driverError
	switch {
	case errors.Is(err, sekka.ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, sekka.ErrAuth):
		return "auth"
	case errors.Is(err, sekka.ErrNoServer):
		return "no_server"
	case errors.Is(err, sekka.ErrRefused):
		return "refused"
	case errors.Is(err, sekka.ErrClosed):
		return "closed"
	case errors.As(err, &de):
		return "other:driver"
	}
	return fmt.Sprintf("other:%T", err)
}

// options converts the request's options to sekka.Options, each value as given (times from
// milliseconds), so that the client's own validation is what the scenario sees. Two values
// cannot be given to the Go API at all, and are invalid_argument here: a count that is not a
// whole number, and an explicit 0 (a zero field of sekka.Options means "the default", so the
// client could not tell "0" from "not given"; the other clients refuse a 0).
func options(raw map[string]json.RawMessage) (sekka.Options, error) {
	var o sekka.Options
	durations := map[string]*time.Duration{
		"connect_timeout_ms": &o.ConnectTimeout, "timeout_ms": &o.Timeout,
		"target_refill_ms": &o.TargetRefill, "validity_ms": &o.Validity,
		"backoff_min_ms": &o.BackoffMin, "backoff_max_ms": &o.BackoffMax,
		"strict_wait_ms": &o.StrictWait,
	}
	counts := map[string]*int{"batch": &o.Batch, "min_batch": &o.MinBatch, "max_batch": &o.MaxBatch}
	files := map[string]*string{"tls_ca_file": new(string), "tls_cert_file": new(string), "tls_key_file": new(string)}
	for key, value := range raw {
		if files[key] != nil {
			if err := json.Unmarshal(value, files[key]); err != nil {
				return o, &driverError{fmt.Sprintf("option %s = %s: %v", key, value, err)}
			}
			continue
		}
		if key == "token" {
			var token *string // null: no token
			if err := json.Unmarshal(value, &token); err != nil {
				return o, &driverError{fmt.Sprintf("option token = %s: %v", value, err)}
			}
			if token != nil {
				o.Token = *token
			}
			continue
		}
		if key != "low_water" && durations[key] == nil && counts[key] == nil {
			return o, &driverError{fmt.Sprintf("unknown option %q", key)}
		}
		var v float64
		if err := json.Unmarshal(value, &v); err != nil {
			return o, &driverError{fmt.Sprintf("option %s = %s: %v", key, value, err)}
		}
		switch {
		case v == 0:
			return o, fmt.Errorf("%w: %s 0 cannot be given: a zero field of sekka.Options means the default",
				sekka.ErrInvalidArgument, key)
		case key == "low_water":
			o.LowWater = v
		case durations[key] != nil:
			*durations[key] = time.Duration(math.Round(v * float64(time.Millisecond)))
		case v != math.Trunc(v) || math.Abs(v) > 1<<53:
			return o, fmt.Errorf("%w: %s %s is not a whole number", sekka.ErrInvalidArgument, key, value)
		default:
			*counts[key] = int(v)
		}
	}
	if *files["tls_ca_file"] != "" || *files["tls_cert_file"] != "" || *files["tls_key_file"] != "" {
		config, err := sekka.TLSFiles(*files["tls_ca_file"], *files["tls_cert_file"], *files["tls_key_file"])
		if err != nil {
			return o, err
		}
		o.TLS = config
	}
	return o, nil
}
