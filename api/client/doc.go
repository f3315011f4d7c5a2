// Package client is a Go client of dagflow's HTTP API (package api), for
// services that start and inspect runs over HTTP without linking the
// engine:
//
//	c, err := client.New("http://dagflow:8080", client.Options{Key: os.Getenv("DAGFLOW_KEY")})
//	run, created, err := c.Trigger(ctx, "order", client.TriggerRequest{
//		Input:          json.RawMessage(`{"order_id":"o-1"}`),
//		IdempotencyKey: "order-o-1",
//	})
//
// An error answer of the API comes back as a *Problem, with its status,
// code, detail and the run it is about.
package client
