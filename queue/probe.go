package queue

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors of Probe, for callers that branch on why Redis refused.
var (
	// ErrRedisAuth: Redis refused the client's credentials (WRONGPASS,
	// NOAUTH): a wrong password or user, or none where one is required.
	ErrRedisAuth = errors.New("queue: Redis refused the credentials")
	// ErrRedisDenied: Redis' ACL refused a command, key or channel the
	// queue needs (NOPERM, or a script's call refused).
	ErrRedisDenied = errors.New("queue: Redis ACL denied an operation")
)

// Commands are the Redis commands the queue sends (PING is the pub/sub
// connection's health check) and those its scripts call. A Redis ACL
// user for dagflow needs them on the keys "<prefix>:*" and the channels
// "<prefix>:*", besides what every client needs to connect (HELLO or
// AUTH; go-redis also sends CLIENT SETINFO and ignores a refusal); Probe
// checks that it has them.
var Commands = []string{
	"EVAL", "EVALSHA", "SUBSCRIBE", "PING",
	"DEL", "EXISTS", "HDEL", "HGET", "HINCRBY", "HMGET", "HSET", "HSETNX",
	"LLEN", "LPOP", "LPUSH", "LRANGE", "LREM", "RPUSH",
	"PEXPIRE", "PUBLISH", "SADD", "SET", "SMEMBERS", "SREM",
	"ZADD", "ZCARD", "ZRANGE", "ZRANGEBYSCORE", "ZREM", "ZREVRANGE", "ZSCORE",
}

// ClusterCommands are what a user needs on a Redis Cluster besides
// Commands: the sharded pub/sub of the wake-ups (SSUBSCRIBE, and
// SPUBLISH in the scripts) and what go-redis's cluster client reads the
// slot map and the commands' key positions with.
var ClusterCommands = []string{"SSUBSCRIBE", "SPUBLISH", "CLUSTER|SLOTS", "COMMAND"}

// probeEval is the script that checks EVAL and EVALSHA themselves, before
// the queue's scripts (whose EVALSHA falls back to EVAL on a server that
// has not seen them) check the commands they call.
var probeEval = redis.NewScript("return 1")

// probeWait bounds each wait of Probe for its own subscription and
// message.
const probeWait = 5 * time.Second

// ProbeError says which operation of Probe Redis refused or failed, what
// it needed, and Redis' answer. It wraps ErrRedisAuth or ErrRedisDenied
// when Redis refused for those reasons, and the underlying error.
type ProbeError struct {
	// Op is the operation: "EVAL", "SUBSCRIBE", "the enqueue script"...
	Op string
	// Commands are the Redis commands Op sends or its script calls.
	Commands []string
	// Keys is the pattern of the keys Op touches, Channel its channel.
	Keys, Channel string
	// Kind is ErrRedisAuth, ErrRedisDenied, or nil for another failure
	// (an unreachable server...).
	Kind error
	// Err is the error Op returned.
	Err error
}

func (e *ProbeError) Error() string {
	var b strings.Builder
	switch e.Kind {
	case ErrRedisAuth:
		fmt.Fprintf(&b, "queue: Redis refused the credentials at %s", e.Op)
	case ErrRedisDenied:
		fmt.Fprintf(&b, "queue: Redis ACL denied %s (needs %s", e.Op, strings.Join(e.Commands, " "))
		switch {
		case e.Keys != "" && e.Channel != "":
			fmt.Fprintf(&b, " on keys %q and channel %q", e.Keys, e.Channel)
		case e.Keys != "":
			fmt.Fprintf(&b, " on keys %q", e.Keys)
		case e.Channel != "":
			fmt.Fprintf(&b, " on channel %q", e.Channel)
		}
		b.WriteString(")")
	default:
		fmt.Fprintf(&b, "queue: probe: %s failed", e.Op)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns Kind (when set) and Err.
func (e *ProbeError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// redisRefusal classifies a Redis error: ErrRedisAuth, ErrRedisDenied or
// nil. A script's refused call is reported by Redis 7.0 as an ERR whose
// text says the script's user cannot run it.
func redisRefusal(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"):
		return ErrRedisAuth
	case strings.Contains(msg, "NOPERM"), strings.Contains(msg, "The user executing the script can't"):
		return ErrRedisDenied
	}
	return nil
}

// Probe checks, on throwaway keys "<prefix>:{probe-<random>}:*", that
// this client may do everything the queue does: EVAL and EVALSHA, every
// script (and so every command they call, on keys under the prefix),
// and the pub/sub wake-up (SUBSCRIBE, and a PUBLISH from a script that
// reaches the subscriber; on a Cluster SSUBSCRIBE and SPUBLISH, after
// CLUSTER SLOTS and COMMAND, which the cluster client needs). It deletes the keys, also when a step fails
// (if Redis lets it). It returns a *ProbeError naming the refused
// operation, the commands it needs and its keys or channel, wrapping
// ErrRedisAuth or ErrRedisDenied when Redis refused. Credentials never
// appear in it.
//
// A node calls it before it starts, so that a wrong password or a
// missing ACL permission stops it at once instead of failing every call
// for ever. It costs about fifteen round trips.
func (q *Queue) Probe(ctx context.Context) error {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return fmt.Errorf("queue: probe: %w", err)
	}
	p := &probe{q: q, name: "probe-" + hex.EncodeToString(suffix)}
	p.k = q.keys(p.name)
	p.ids = []string{"probe-ready", "probe-delayed"}
	defer p.cleanup(ctx)
	return p.run(ctx)
}

// probe is one run of Probe.
type probe struct {
	q    *Queue
	name string // the throwaway queue
	k    keys
	ids  []string
}

// fail wraps a failed operation's error.
func (p *probe) fail(op string, commands []string, keys, channel string, err error) error {
	return &ProbeError{Op: op, Commands: commands, Keys: keys, Channel: channel, Kind: redisRefusal(err), Err: err}
}

func (p *probe) run(ctx context.Context) error {
	c := p.q.client
	if cc := p.q.cluster; cc != nil {
		// go-redis's cluster client needs these before anything else; a
		// refusal would otherwise surface as a denied EVAL, or (COMMAND,
		// which it only logs) not at all.
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis reads the slot map with
		if err := cc.ClusterSlots(ctx).Err(); err != nil {
			return p.fail("CLUSTER SLOTS (the cluster client's slot map)", []string{"CLUSTER|SLOTS"}, "", "", err)
		}
		if err := cc.Command(ctx).Err(); err != nil {
			return p.fail("COMMAND (the cluster client's key positions)", []string{"COMMAND"}, "", "", err)
		}
	}
	if err := probeEval.Eval(ctx, c, nil).Err(); err != nil {
		return p.fail("EVAL", []string{"EVAL"}, "", "", err)
	}
	if err := probeEval.EvalSha(ctx, c, nil).Err(); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return p.fail("EVALSHA", []string{"EVALSHA"}, "", "", err)
	}
	// On a Cluster the wake-ups use sharded pub/sub (see notifier).
	sub, pub := "SUBSCRIBE", "PUBLISH"
	var ps *redis.PubSub
	if p.q.cluster != nil {
		sub, pub = "SSUBSCRIBE", "SPUBLISH"
		ps = p.q.cluster.SSubscribe(ctx, p.k.channel)
	} else {
		ps = c.Subscribe(ctx, p.k.channel)
	}
	defer ps.Close()
	if err := p.await(ctx, ps, func(m any) bool { _, ok := m.(*redis.Subscription); return ok }); err != nil {
		return p.fail(sub, []string{sub}, "", p.k.channel, err)
	}
	if err := p.scripts(ctx); err != nil {
		return err
	}
	// The enqueue of a delayed task found the waiting flag set and
	// published a wake-up: it must have reached the subscriber.
	if err := p.await(ctx, ps, func(m any) bool { msg, ok := m.(*redis.Message); return ok && msg.Channel == p.k.channel }); err != nil {
		return p.fail("the wake-up published by the enqueue script", []string{pub, sub}, "", p.k.channel, err)
	}
	return nil
}

// await receives from ps until match accepts a message, an error comes,
// or probeWait passes.
func (p *probe) await(ctx context.Context, ps *redis.PubSub, match func(any) bool) error {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	for {
		m, err := ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("nothing received within %v", probeWait)
			}
			return err
		}
		if match(m) {
			return nil
		}
	}
}

// scripts runs every script of the queue on the throwaway queue, along
// paths that together call every command the scripts use.
func (p *probe) scripts(ctx context.Context) error {
	q, name := p.q, p.name
	ready, delayed := p.ids[0], p.ids[1]
	now := q.now()
	lease := time.Minute
	steps := []struct {
		op       string
		commands []string
		run      func() error
	}{
		// Finds nothing and sets the waiting flag.
		{"the dequeue script", []string{"ZRANGEBYSCORE", "EXISTS", "LPOP", "LLEN", "SET", "ZRANGE"}, func() error {
			_, _, _, err := q.dequeueFrom(ctx, name, DequeueParams{Max: 1, Lease: lease}, true)
			return err
		}},
		// The delayed task is due before any other: it wakes the waiter.
		{"the enqueue script", []string{"HSETNX", "HGET", "HSET", "ZRANGE", "ZADD", "RPUSH", "DEL", "PUBLISH"}, func() error {
			_, err := q.Enqueue(ctx, name, Item{ID: ready}, Item{ID: delayed, At: now.Add(time.Hour)})
			return err
		}},
		{"the dequeue script", []string{"ZRANGEBYSCORE", "ZREM", "RPUSH", "HINCRBY", "EXISTS", "LPOP", "ZADD", "LLEN", "SET", "ZRANGE"}, func() error {
			tasks, _, _, err := q.dequeueFrom(ctx, name, DequeueParams{Max: 1, Lease: lease}, false)
			if err == nil && (len(tasks) != 1 || tasks[0].ID != ready) {
				err = fmt.Errorf("leased %v, want %s", tasks, ready)
			}
			return err
		}},
		{"the extend script", []string{"ZSCORE", "ZADD"}, func() error {
			_, err := q.Extend(ctx, name, ready, lease)
			return err
		}},
		{"the stats script", []string{"LLEN", "ZCARD"}, func() error {
			_, err := q.Stats(ctx, name)
			return err
		}},
		{"the list script", []string{"LRANGE", "ZRANGE", "HGET"}, func() error {
			if _, err := q.List(ctx, name, StateLeased, 0, 10); err != nil {
				return err
			}
			_, err := q.List(ctx, name, StateReady, 0, 10)
			return err
		}},
		{"the release script", []string{"HGET", "ZREM", "HSET", "LPUSH", "DEL", "PUBLISH"}, func() error {
			return q.Release(ctx, name, ready)
		}},
		{"the retry script", []string{"HGET", "ZREM", "RPUSH", "HSET", "ZRANGE", "ZADD", "DEL", "PUBLISH"}, func() error {
			if _, _, _, err := q.dequeueFrom(ctx, name, DequeueParams{Max: 1, Lease: lease}, false); err != nil {
				return err
			}
			return q.Retry(ctx, name, ready, now)
		}},
		{"the sweep script", []string{"ZRANGEBYSCORE", "ZREM", "RPUSH", "HINCRBY", "DEL", "PUBLISH"}, func() error {
			_, err := q.Sweep(ctx, name, 10)
			return err
		}},
		// Routed to a kind, then leased by a consumer of that kind.
		{"the route script", []string{"HGET", "ZREM", "HSET", "RPUSH", "SADD", "EXISTS", "SMEMBERS", "LPOP", "HDEL", "LLEN", "SREM"}, func() error {
			return p.route(ctx, name, ready, lease)
		}},
		// One leased and one delayed task: both ways out of the index.
		{"the ack script", []string{"ZREM", "HGET", "LREM", "HDEL"}, func() error {
			return q.Ack(ctx, name, ready, delayed)
		}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			commands := s.commands
			if q.cluster != nil { // the scripts publish sharded there
				commands = slices.Clone(commands)
				for i, c := range commands {
					if c == "PUBLISH" {
						commands[i] = "SPUBLISH"
					}
				}
			}
			return p.fail(s.op, commands, p.q.pattern(name), p.k.channel, err)
		}
	}
	return nil
}

// cleanup deletes every key the probe may have made, with a context of
// its own: the caller's may have ended.
func (p *probe) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeWait)
	defer cancel()
	base := strings.TrimSuffix(p.k.ready, "ready")
	keys := []string{p.k.ready, p.k.delayed, p.k.leased, p.k.waiting,
		base + "routed", base + "r:" + probeKind, base + "rk"}
	for _, id := range p.ids {
		keys = append(keys, p.k.index+strconv.Itoa(bucket(id)))
	}
	// One key per call: on Cluster they share a slot, but a DEL of
	// several keys is refused by a proxy that splits them.
	for _, k := range keys {
		if err := p.q.client.Del(ctx, k).Err(); err != nil {
			p.q.log.Warn("queue: probe: deleting a throwaway key failed", "key", k, "err", err)
			return
		}
	}
}

// bucket is the index bucket of id, as ikey in lua/common.lua computes it:
// the first four hex digits of its SHA-1, modulo 2048.
func bucket(id string) int {
	sum := sha1.Sum([]byte(id))
	return (int(sum[0])<<8 | int(sum[1])) % 2048
}

// probeKind is the routing kind of the probe's route step.
const probeKind = "probe"

// route leases the ready task id, routes it to probeKind and leases it
// again as a consumer of that kind.
func (p *probe) route(ctx context.Context, name, id string, lease time.Duration) error {
	q := p.q
	if _, _, _, err := q.dequeueFrom(ctx, name, DequeueParams{Max: 1, Lease: lease}, false); err != nil {
		return err
	}
	if err := q.Route(ctx, name, id, probeKind); err != nil {
		return err
	}
	tasks, _, _, err := q.dequeueFrom(ctx, name, DequeueParams{Max: 1, Lease: lease, Kinds: []string{probeKind}}, false)
	if err == nil && (len(tasks) != 1 || tasks[0].ID != id) {
		err = fmt.Errorf("leased %v as a consumer of kind %q, want %s", tasks, probeKind, id)
	}
	return err
}
