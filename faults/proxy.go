package faults

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy for fault tests: it listens on a free loopback port
// and forwards every connection to a target, until told to cut
// connections, slow them down or drop a reply.
//
// With MySQL framing (see Config.MySQL) the client-to-server stream is
// read packet by packet, which is what DropReplyAfter needs to find a
// transaction's COMMIT.
type Proxy struct {
	target string
	mysql  bool
	ln     net.Listener

	mu      sync.Mutex
	conns   map[*link]struct{}
	cut     bool
	latency time.Duration
	drops   []*dropRule
	closed  bool
	stats   ProxyStats

	wg sync.WaitGroup
}

// ProxyConfig configures NewProxy.
type ProxyConfig struct {
	// Target is the host:port every connection is forwarded to.
	Target string
	// MySQL frames the client-to-server stream as MySQL protocol packets
	// (3-byte length, sequence id, payload). DropReplyAfter needs it.
	MySQL bool
}

// ProxyStats counts what a proxy did.
type ProxyStats struct {
	Accepted int // connections forwarded
	Refused  int // connections closed at once while cut
	Dropped  int // replies swallowed by DropReplyAfter rules
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	// armed is set (by the client-to-server copier) when the server's
	// next packet must be swallowed and the connection closed.
	armed chan struct{}
	once  sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		l.server.Close()
	})
}

// dropRule swallows the reply to the first `command` packet sent on a
// connection after a packet containing `marker`.
type dropRule struct {
	marker  []byte
	command []byte
	fired   chan struct{}
	done    bool
}

// NewProxy listens on 127.0.0.1 on a free port and forwards to cfg.Target.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("faults: ProxyConfig.Target is empty")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: proxy listen: %w", err)
	}
	p := &Proxy{target: cfg.Target, mysql: cfg.MySQL, ln: ln, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's host:port; clients connect here instead of the
// target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Cut closes every open connection and refuses new ones (they are
// accepted and reset at once) until Restore: to the client the target is
// unreachable.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		conns = append(conns, l)
	}
	p.mu.Unlock()
	for _, l := range conns {
		l.close()
	}
}

// Restore ends a Cut: new connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// SetLatency delays every forwarded chunk of data, in both directions, by
// d (0 removes the delay).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// DropReplyAfter installs a one-shot rule (MySQL framing only): on the
// first connection whose client sends a packet containing marker, the
// next client packet (or that one) that is a COM_QUERY with the text
// command (e.g. "COMMIT"), alone or as its last statement, is forwarded to
// the server, the server's replies to it are swallowed, and the connection
// is closed. The client cannot tell whether
// the command took effect: an ambiguous commit. The returned channel is
// closed once the reply was dropped.
func (p *Proxy) DropReplyAfter(marker []byte, command string) <-chan struct{} {
	r := &dropRule{marker: bytes.Clone(marker), command: []byte(command), fired: make(chan struct{})}
	p.mu.Lock()
	p.drops = append(p.drops, r)
	p.mu.Unlock()
	return r.fired
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut, closed := p.cut, p.closed
		if cut || closed {
			p.stats.Refused++
		}
		p.mu.Unlock()
		if cut || closed {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, like a refused connection
			}
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	l := &link{client: client, server: server, armed: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.conns[l] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		l.close()
	}()
	done := make(chan struct{}, 2)
	go func() {
		fired := false
		if p.mysql {
			fired = p.clientToServerMySQL(l)
		} else {
			p.copy(l.server, l.client)
		}
		if !fired {
			// After a fired drop rule the server's reply must still
			// arrive (and be swallowed) before the connection closes.
			l.close()
		}
		done <- struct{}{}
	}()
	go func() {
		p.serverToClient(l)
		l.close()
		done <- struct{}{}
	}()
	<-done
	<-done
}

func (p *Proxy) delay() {
	p.mu.Lock()
	d := p.latency
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d) // the injected latency itself
	}
}

// copy forwards raw bytes from src to dst.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.delay()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// serverToClient forwards the server's bytes; once the link is armed it
// drops the replies to the matched query (every statement's, the last
// one's included) and closes the connection.
func (p *Proxy) serverToClient(l *link) {
	if !p.mysql {
		p.copy(l.client, l.server)
		return
	}
	for {
		pkt, err := readPacket(l.server)
		if err != nil {
			return
		}
		select {
		case <-l.armed:
			// A reply to the matched query: swallow it, and stop after
			// the last one.
			if lastReply(pkt[4:]) {
				return
			}
			continue
		default:
		}
		p.delay()
		if _, err := l.client.Write(pkt); err != nil {
			return
		}
	}
}

// clientToServerMySQL forwards the client's packets one by one, matching
// them against the drop rules. It reports whether a rule fired.
func (p *Proxy) clientToServerMySQL(l *link) bool {
	var rule *dropRule // the rule this connection matched a marker of
	for {
		pkt, err := readPacket(l.client)
		if err != nil {
			return false
		}
		payload := pkt[4:]
		fire := false
		p.mu.Lock()
		if rule == nil {
			for _, r := range p.drops {
				if !r.done && bytes.Contains(payload, r.marker) {
					rule = r
					r.done = true // one connection per rule
					break
				}
			}
		}
		// The command alone, or as the last statement of a multi-statement
		// call (the store sends a transaction's last writes with its
		// COMMIT), possibly in the packet that carried the marker.
		if rule != nil && len(payload) > 0 && payload[0] == comQuery && endsWithStatement(payload[1:], rule.command) {
			fire = true
			p.stats.Dropped++
		}
		p.mu.Unlock()
		if fire {
			close(l.armed)
		}
		p.delay()
		if _, err := l.server.Write(pkt); err != nil {
			return false
		}
		if fire {
			// The server runs the command and replies; serverToClient
			// swallows the reply and ends the connection.
			close(rule.fired)
			return true
		}
	}
}

const comQuery = 0x03

// endsWithStatement reports whether the query text is command, or ends with
// it as its last statement.
func endsWithStatement(text, command []byte) bool {
	text = bytes.TrimSpace(text)
	if bytes.Equal(text, command) {
		return true
	}
	head, ok := bytes.CutSuffix(text, command)
	return ok && bytes.HasSuffix(bytes.TrimSpace(head), []byte(";"))
}

// lastReply reports whether a server packet ends the replies to a query:
// an error, or an OK packet without SERVER_MORE_RESULTS_EXISTS (a
// multi-statement call gets one OK per statement).
func lastReply(payload []byte) bool {
	if len(payload) == 0 || payload[0] != 0x00 {
		return true // an error, or something this proxy does not follow
	}
	rest := payload[1:]
	for range 2 { // affected rows, last insert id
		n, ok := lenEncSize(rest)
		if !ok {
			return true
		}
		rest = rest[n:]
	}
	if len(rest) < 2 {
		return true
	}
	const moreResultsExist = 0x0008
	return (uint16(rest[0])|uint16(rest[1])<<8)&moreResultsExist == 0
}

// lenEncSize returns the size of the length-encoded integer b starts with.
func lenEncSize(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 1
	switch b[0] {
	case 0xfc:
		n = 3
	case 0xfd:
		n = 4
	case 0xfe:
		n = 9
	}
	return n, len(b) >= n
}

// readPacket reads one MySQL packet: a 4-byte header (3-byte little-endian
// payload length, sequence id) and its payload.
func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	pkt := make([]byte, 4+n)
	copy(pkt, hdr[:])
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		return nil, err
	}
	return pkt, nil
}
