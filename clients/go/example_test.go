package sekka_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"sekka.dev/go/sekka"
)

// Ids from two servers: a snowflake id, then a segment tag's next id.
func Example() {
	c, err := sekka.New(sekka.Options{
		Servers: []string{"127.0.0.1:6380", "127.0.0.1:6381"},
		Token:   "", // the servers' server.auth_token, if they have one
	})
	if err != nil {
		log.Fatal(err) // an option the client refused: errors.Is(err, sekka.ErrInvalidArgument)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	orderID, err := c.NextID(ctx) // from the local buffer: no network in steady state
	if errors.Is(err, sekka.ErrNoServer) {
		log.Fatal(err) // names every server with its last error
	} else if err != nil {
		log.Fatal(err)
	}
	invoiceNo, err := c.Next(ctx, "invoice") // increasing within this client
	if err != nil {
		log.Fatal(err) // an unknown tag: errors.Is(err, sekka.ErrRefused)
	}
	fmt.Println(orderID, invoiceNo, c.Stats().Served)
}
