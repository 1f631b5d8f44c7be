// Package sekka is the Go client of sekka, a unique-id service. It hands out ids from a local
// buffer that one background goroutine refills from a list of sekka servers over the Redis
// protocol (RESP2), with failover; it behaves like sekka's other clients (docs/clients.md).
// Standard library only.
//
//	c, err := sekka.New(sekka.Options{Servers: []string{"127.0.0.1:6380", "127.0.0.1:6381"}})
//	if err != nil { ... }
//	defer c.Close()
//	id, err := c.NextID(ctx)              // a snowflake id, from the buffer
//	invoice, err := c.Next(ctx, "invoice") // a segment tag's next id
//
// How it behaves:
//
//   - Buffer and refill. The first call fetches a batch (ID.BATCH n for snowflake ids,
//     SEG.NEXT tag n for a segment tag, one buffer each); afterwards a refill starts when
//     fewer than LowWater of a batch is left, so callers do not wait on the network in steady
//     state. The batch size adapts by Leaf's rule between MinBatch and MaxBatch so that a
//     batch lasts about TargetRefill. A server that refuses a batch with "allowed 1 to M"
//     caps the batch size at M from then on.
//   - Validity. Ids buffered longer than Validity are dropped unused.
//   - Failover. A connection error, a timeout (Timeout bounds a whole command, ConnectTimeout
//     a connect), a reply that breaks the protocol, or an error reply LEASELOST,
//     CLOCKBACKWARDS or UNAVAILABLE moves the client to the next server; the failed one is
//     skipped for BackoffMin, doubling up to BackoffMax. A connection is never used again
//     after an error. A reused connection that fails before any byte of the reply (the server
//     closed it while idle) is replaced and the command sent once more, without counting as a
//     failure.
//   - Order. Snowflake ids increase while the client draws from one server (after a failover
//     they come from another worker and can be lower; they stay unique). A tag's ids always
//     increase within the client: ids not above the highest it has given are dropped.
//   - Errors. A caller sees an error only when its buffer is empty: ErrNoServer (no server
//     could serve, naming each with its last error; or no ids came within twice
//     ConnectTimeout + Timeout per server, plus 1 s), ErrAuth, ErrRefused (with the server's
//     message), ErrClosed, or its context's error.
//
// A Client is safe for use by many goroutines; it keeps one connection per server, used only
// by its refill goroutine.
package sekka
