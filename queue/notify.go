package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier wakes blocked Dequeue calls of this process. It holds one
// pub/sub connection for the whole Queue, subscribed to the notify channel
// of every queue that has been dequeued from. On a Redis Cluster it uses
// sharded pub/sub instead: one SSUBSCRIBE connection per channel, on the
// shard that owns the channel's slot (the queue's hash tag), so that a
// wake-up goes to that shard only and not, as a classic PUBLISH does, to
// every node of the cluster. The waiting flag a consumer sets says which
// of the two it listens on (dequeue.lua, wake in common.lua). When the
// slot moves (a failover, a resharding) the server ends the shard
// subscription, and a client with a stale slot map gets MOVED for its
// SSUBSCRIBE; the notifier reloads the map and subscribes again, on the
// new owner (superviseShard). The scripts publish "n tasks
// became ready" on a queue's channel only while its waiting flag is set,
// which a dequeue that found nothing sets: an idle queue costs a PUBLISH
// per wake-up, a busy one nothing.
//
// A notification of n tasks wakes waiters of this process, in the order
// they started waiting, until their batch sizes add up to n. A woken consumer that leaves ready tasks behind
// wakes the next waiter itself (chain), and one that empties the queue
// while others still wait sets the flag again, so no waiter sleeps while
// work is ready and nobody will tell it. The PollInterval timer is the
// safety net for lost messages (a reconnect also wakes every waiter).
type notifier struct {
	q *Queue

	mu      sync.Mutex
	ps      *redis.PubSub            // classic: one connection for every channel
	shards  map[string]*redis.PubSub // sharded (Cluster): one per channel
	topics  map[string]*topic        // by channel
	closed  bool
	closing chan struct{}
	ctx     context.Context // canceled by close
	cancel  context.CancelFunc
	loops   sync.WaitGroup // the receive loops
}

type topic struct {
	confirmed chan struct{} // closed once the server confirmed the subscription
	gaveUp    bool          // confirmation did not come in time; don't wait again
	waiters   []*waiter
}

type waiter struct {
	ch        chan struct{} // capacity 1: "look again"
	max       int           // batch size
	channels  []string
	in        map[string]bool // registered on that topic
	signalled map[string]bool // woken by that topic, and not looked yet
	finished  bool
	sleeping  bool // between its scripts and its wake-up (tests look at it)
}

// subscribeWait bounds how long Dequeue waits for the subscription to be
// confirmed before it goes on relying on the poll timer.
const subscribeWait = 2 * time.Second

func newNotifier(q *Queue) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{q: q, topics: map[string]*topic{}, shards: map[string]*redis.PubSub{}, closing: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// subscribe makes sure the pub/sub connection listens on channels and that
// the server confirmed it, so that a notification published after the
// caller's next script cannot be missed.
func (n *notifier) subscribe(ctx context.Context, channels []string) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	var fresh []string
	var wait []*topic
	for _, ch := range channels {
		t := n.topics[ch]
		if t == nil {
			t = &topic{confirmed: make(chan struct{})}
			n.topics[ch] = t
			fresh = append(fresh, ch)
		}
		if !t.gaveUp {
			wait = append(wait, t)
		}
	}
	var err error
	switch {
	case len(fresh) == 0:
	case n.q.cluster != nil:
		// One goroutine per channel dials and keeps the subscription,
		// outside n.mu; the confirmation is awaited below.
		for _, ch := range fresh {
			n.loops.Add(1)
			go n.superviseShard(ch)
		}
	case n.ps == nil:
		n.ps = n.q.client.Subscribe(ctx, fresh...)
		n.loops.Add(1)
		go n.loop(n.ps, n.ps.ChannelWithSubscriptions(redis.WithChannelSize(1000)))
	default:
		// The write is short; the receive loop does not need n.mu to read.
		err = n.ps.Subscribe(ctx, fresh...)
	}
	n.mu.Unlock()
	if err != nil {
		n.q.log.Warn("queue: subscribe failed; relying on polling", "channels", fresh, "err", err)
	}
	timeout := time.NewTimer(subscribeWait)
	defer timeout.Stop()
	for _, t := range wait {
		select {
		case <-t.confirmed:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return ErrClosed
		case <-timeout.C:
			n.q.log.Warn("queue: subscription not confirmed; relying on polling until it is", "channels", channels)
			n.mu.Lock()
			for _, t := range wait {
				t.gaveUp = true
			}
			n.mu.Unlock()
			return nil
		}
	}
	return nil
}

// superviseShard keeps a shard subscription to ch, on a connection of
// its own to the master that owns ch's slot, until the notifier closes.
// go-redis treats a MOVED answer to SSUBSCRIBE (a stale slot map) as a
// reply and does not reconnect, and the server ends a shard subscription
// when the slot moves; so the subscription is made again, after a reload
// of the slot map and with a growing backoff, whenever the server ends
// it, answers with an error, does not confirm it within subscribeWait, or
// does not answer a PING. It dials without n.mu, so a hung master delays
// the subscriptions of its own slots only.
func (n *notifier) superviseShard(ch string) {
	defer n.loops.Done()
	backoff := shardBackoffMin
	for {
		// The master the slot map names, which SSubscribe dials: checked
		// against the map again while the subscription lasts.
		addr := ""
		if m, err := n.q.cluster.MasterForKey(n.ctx, ch); err == nil {
			addr = m.Options().Addr
		}
		ps := n.q.cluster.SSubscribe(n.ctx, ch) // dials: not under n.mu
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			ps.Close()
			return
		}
		n.shards[ch] = ps
		n.mu.Unlock()
		confirmed, err := n.receiveShard(ps, ch, addr)
		n.mu.Lock()
		if n.shards[ch] == ps {
			delete(n.shards, ch)
		}
		closed := n.closed
		n.mu.Unlock()
		ps.Close()
		if closed {
			return
		}
		if confirmed {
			backoff = shardBackoffMin
		}
		n.q.log.Warn("queue: shard subscription lost; subscribing again", "channel", ch, "err", err, "backoff", backoff)
		n.q.cluster.ReloadState(n.ctx)
		select {
		case <-time.After(backoff):
		case <-n.closing:
			return
		}
		backoff = min(2*backoff, shardBackoffMax)
	}
}

const (
	shardBackoffMin = 100 * time.Millisecond
	shardBackoffMax = 5 * time.Second
	// shardPing is how long a shard connection may be silent before the
	// notifier sends a PING; a PING unanswered for as long ends it.
	shardPing = 3 * time.Second
)

// errShardEnded says that the server ended a shard subscription.
var errShardEnded = errors.New("the server ended the subscription (slot moved)")

// receiveShard reads ps, the subscription to ch made on the master at
// addr, until it must be made again (the error says why) or the notifier
// closes. confirmed reports whether the server confirmed the
// subscription.
//
// A subscription made with a stale slot map right after a failover may
// land on the old master, now a replica, which confirms it but passes on
// no wake-up. So on the first quiet spell after the confirmation the
// slot map is reread, and on every quiet spell a map that names another
// master for ch ends the subscription, to be made on that master.
func (n *notifier) receiveShard(ps *redis.PubSub, ch, addr string) (confirmed bool, err error) {
	deadline := time.Now().Add(subscribeWait)
	pinged, reread := false, false
	for {
		wait := shardPing
		if !confirmed {
			wait = min(wait, time.Until(deadline))
			if wait <= 0 {
				return false, fmt.Errorf("no ssubscribe confirmation within %v", subscribeWait)
			}
		}
		m, err := ps.ReceiveTimeout(n.ctx, wait)
		if n.ctx.Err() != nil {
			return confirmed, n.ctx.Err()
		}
		if err != nil {
			var nerr net.Error
			if errors.As(err, &nerr) && nerr.Timeout() {
				if !confirmed {
					continue // the deadline check above decides
				}
				if m, err := n.q.cluster.MasterForKey(n.ctx, ch); err == nil && addr != "" && m.Options().Addr != addr {
					return true, fmt.Errorf("the slot map names %s, not %s, as the master of the channel's slot", m.Options().Addr, addr)
				}
				if !reread {
					n.q.cluster.ReloadState(n.ctx)
					reread = true
				}
				if pinged {
					return true, fmt.Errorf("no answer to PING within %v", shardPing)
				}
				if err := ps.Ping(n.ctx); err != nil {
					return true, fmt.Errorf("ping: %w", err)
				}
				pinged = true
				continue
			}
			// A server error (MOVED, CLUSTERDOWN, ...) or a broken
			// connection: make it again, on the owner the reloaded map names.
			return confirmed, err
		}
		pinged = false
		switch m := m.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "sunsubscribe":
				return confirmed, errShardEnded
			case "ssubscribe":
				confirmed = true
				n.confirm(m.Channel)
			}
		case *redis.Message:
			n.message(m)
		}
	}
}

func (n *notifier) loop(ps *redis.PubSub, msgs <-chan any) {
	defer n.loops.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirm(m.Channel)
			}
		case *redis.Message:
			n.message(m)
		}
	}
}

// confirm records that the server confirmed the subscription to ch. A
// confirmation after the first (a reconnect, a new shard subscription),
// or one that came after Dequeue stopped waiting for it, wakes every
// waiter of ch: messages may have been lost meanwhile.
func (n *notifier) confirm(ch string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.topics[ch]; t != nil {
		select {
		case <-t.confirmed:
			n.wakeLocked(ch, t, math.MaxInt)
		default:
			close(t.confirmed)
			if t.gaveUp {
				n.wakeLocked(ch, t, math.MaxInt)
			}
		}
	}
}

// message wakes waiters for the notification m ("n tasks became ready").
func (n *notifier) message(m *redis.Message) {
	count, err := strconv.Atoi(m.Payload)
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.topics[m.Channel]; t != nil {
		if err != nil || count < 1 {
			count = math.MaxInt
		}
		n.wakeLocked(m.Channel, t, count)
	}
}

// wakeLocked wakes the first waiters of t until their batch sizes add
// up to count tasks.
func (n *notifier) wakeLocked(ch string, t *topic, count int) {
	for count > 0 && len(t.waiters) > 0 {
		w := t.waiters[0]
		count -= w.max
		t.waiters[0] = nil
		t.waiters = t.waiters[1:]
		w.in[ch] = false
		w.signalled[ch] = true
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

func (n *notifier) newWaiter(channels []string, max int) *waiter {
	return &waiter{
		ch:        make(chan struct{}, 1),
		max:       max,
		channels:  channels,
		in:        make(map[string]bool, len(channels)),
		signalled: make(map[string]bool, len(channels)),
	}
}

// register puts w (back) on the waiter list of each of its channels. It
// must come before the scripts that decide to wait.
func (n *notifier) register(w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range w.channels {
		if t := n.topics[ch]; t != nil && !w.in[ch] {
			t.waiters = append(t.waiters, w)
			w.in[ch] = true
		}
	}
}

// setSleeping records whether w is asleep.
func (n *notifier) setSleeping(w *waiter, v bool) {
	n.mu.Lock()
	w.sleeping = v
	n.mu.Unlock()
}

// look marks that w is about to run the script of ch, and reports whether
// other waiters of this process wait on ch.
func (n *notifier) look(w *waiter, ch string) (others bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.signalled[ch] = false
	t := n.topics[ch]
	if t == nil {
		return false
	}
	c := len(t.waiters)
	if w.in[ch] {
		c--
	}
	return c > 0
}

// finish takes w off every list. Wake-ups w received but did not act on
// go to the next waiter; chain (if not empty) wakes one more waiter of
// that channel because the consumer left ready tasks behind.
func (n *notifier) finish(w *waiter, chain string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.finished {
		return
	}
	w.finished = true
	for _, ch := range w.channels {
		t := n.topics[ch]
		if t == nil {
			continue
		}
		if w.in[ch] {
			for i, x := range t.waiters {
				if x == w {
					t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
					break
				}
			}
			w.in[ch] = false
		}
		if w.signalled[ch] || ch == chain {
			n.wakeLocked(ch, t, 1) // one waiter
		}
	}
}

func (n *notifier) close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.closing)
	n.cancel()
	var pss []*redis.PubSub
	if n.ps != nil {
		pss = append(pss, n.ps)
	}
	for _, ps := range n.shards {
		pss = append(pss, ps)
	}
	n.mu.Unlock()
	var errs []error
	for _, ps := range pss {
		errs = append(errs, ps.Close())
	}
	n.loops.Wait()
	return errors.Join(errs...)
}
