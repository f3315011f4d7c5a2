package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/engine"
)

// queueLimitHelp documents --queue-limit.
const queueLimitHelp = "limit a queue on all nodes together, repeatable: " +
	"NAME=concurrency:N (at most N running), NAME=rate:N/PERIOD (at most N starts per PERIOD, e.g. rate:20/1s), " +
	"or both with burst:N, comma-separated (see docs/flow-control.md); give every node the same limits"

// parseQueueLimits reads the --queue-limit values.
func parseQueueLimits(specs []string) (map[string]engine.QueueLimit, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make(map[string]engine.QueueLimit, len(specs))
	for _, spec := range specs {
		name, body, ok := strings.Cut(spec, "=")
		if !ok || name == "" || body == "" {
			return nil, fmt.Errorf("--queue-limit %q: want NAME=concurrency:N or NAME=rate:N/PERIOD", spec)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--queue-limit: queue %q is given twice", name)
		}
		var l engine.QueueLimit
		for _, part := range strings.Split(body, ",") {
			key, val, _ := strings.Cut(part, ":")
			var err error
			switch key {
			case "concurrency":
				l.Concurrency, err = strconv.Atoi(val)
			case "burst":
				l.Burst, err = strconv.Atoi(val)
			case "rate":
				n, per, ok := strings.Cut(val, "/")
				if !ok {
					err = fmt.Errorf("want N/PERIOD, e.g. 20/1s")
					break
				}
				if l.Rate, err = strconv.Atoi(n); err == nil {
					l.Per, err = time.ParseDuration(per)
				}
			default:
				err = fmt.Errorf("unknown setting %q (want concurrency, rate or burst)", key)
			}
			if err != nil {
				return nil, fmt.Errorf("--queue-limit %q: %s: %w", spec, part, err)
			}
		}
		out[name] = l
	}
	return out, nil
}
