package queue

import (
	"context"
	"errors"
	"math"
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
// subscription; the notifier subscribes again, on the new owner. The scripts publish "n tasks
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

	mu     sync.Mutex
	ps     *redis.PubSub            // classic: one connection for every channel
	shards map[string]*redis.PubSub // sharded (Cluster): one per channel
	// shardAddr is the master each shard subscription was sent to, as
	// the client's slot map said then.
	shardAddr map[string]string
	topics    map[string]*topic // by channel
	closed    bool
	closing   chan struct{}
	loops     sync.WaitGroup // the receive loops
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
	return &notifier{q: q, topics: map[string]*topic{}, shards: map[string]*redis.PubSub{}, shardAddr: map[string]string{}, closing: make(chan struct{})}
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
		for _, ch := range fresh {
			n.subscribeShardLocked(ctx, ch)
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

// subscribeShardLocked subscribes to ch with SSUBSCRIBE on a connection
// of its own, to the shard that owns ch's slot. n.mu is held.
func (n *notifier) subscribeShardLocked(ctx context.Context, ch string) {
	// go-redis sends the SSUBSCRIBE now and again on every reconnect,
	// routed by the slot map of that moment; ctx only bounds this write.
	ps := n.q.cluster.SSubscribe(context.WithoutCancel(ctx), ch)
	n.shards[ch] = ps
	if m, err := n.q.cluster.MasterForKey(ctx, ch); err == nil {
		n.shardAddr[ch] = m.Options().Addr
	}
	n.loops.Add(1)
	go n.loop(ps, ps.ChannelWithSubscriptions(redis.WithChannelSize(1000)))
}

// resubscribe replaces old, the shard subscription of ch that the server
// ended (its slot moved), with a new one on the slot's owner now. It asks
// the client to read the slot map again until the map names another
// master for ch than the one old was on (up to resubscribeWait), so that
// the new subscription is not sent back to the node that just gave the
// slot away. The new one's confirmation wakes every waiter of ch:
// messages may have been lost meanwhile; until then the PollInterval
// timer is the safety net.
func (n *notifier) resubscribe(old *redis.PubSub, ch string) {
	n.mu.Lock()
	if n.closed || n.shards[ch] != old {
		n.mu.Unlock()
		return
	}
	n.q.log.Info("queue: shard subscription ended by the server (slot moved); subscribing again", "channel", ch)
	delete(n.shards, ch)
	was := n.shardAddr[ch]
	old.Close() // ends old's loop, this one
	n.mu.Unlock()
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		ctx, cancel := context.WithTimeout(context.Background(), resubscribeWait)
		defer cancel()
		for {
			n.q.cluster.ReloadState(ctx)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-n.closing:
				return
			}
			m, err := n.q.cluster.MasterForKey(ctx, ch)
			if (err == nil && m.Options().Addr != was) || ctx.Err() != nil {
				break
			}
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.closed && n.shards[ch] == nil {
			n.subscribeShardLocked(context.Background(), ch)
		}
	}()
}

// resubscribeWait bounds how long a shard subscription the server ended
// waits for the client's slot map to name the slot's new master.
const resubscribeWait = 5 * time.Second

func (n *notifier) loop(ps *redis.PubSub, msgs <-chan any) {
	defer n.loops.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "sunsubscribe" {
				n.resubscribe(ps, m.Channel)
				continue
			}
			if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
				continue
			}
			n.mu.Lock()
			if t := n.topics[m.Channel]; t != nil {
				select {
				case <-t.confirmed:
					// A resubscription after a reconnect: messages may have
					// been lost meanwhile, so everyone looks again.
					n.wakeLocked(m.Channel, t, math.MaxInt)
				default:
					close(t.confirmed)
				}
			}
			n.mu.Unlock()
		case *redis.Message:
			count, err := strconv.Atoi(m.Payload)
			n.mu.Lock()
			if t := n.topics[m.Channel]; t != nil {
				if err != nil || count < 1 {
					count = math.MaxInt
				}
				n.wakeLocked(m.Channel, t, count)
			}
			n.mu.Unlock()
		}
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
