package main

// Worker-side bookkeeping, the Go twin of benchmarks/_probe.py: handlers count in memory (a
// byte per task index) and the numbers reach the driver as UDP datagrams on loopback, in the
// same JSON shapes, so counting adds no Redis round trip to the task being measured.

import (
	"encoding/json"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// wallNow is time.time(): seconds since the epoch, comparable with the driver's clock.
func wallNow() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

type snapshot struct {
	Pid        int     `json:"pid"`
	N          int     `json:"n"`
	Distinct   int     `json:"distinct"`
	Over       int     `json:"over"`
	OutOfRange int     `json:"out_of_range"`
	TFirst     float64 `json:"t_first"`
	TLast      float64 `json:"t_last"`
	TSent      float64 `json:"t_sent"`
}

// probe counts executions; handlers run on many goroutines, so a mutex guards the counters.
type probe struct {
	mu       sync.Mutex
	expected int
	counts   []byte
	s        snapshot
	conn     *net.UDPConn
}

// newProbe reads BENCH_N and BENCH_UDP_PORT as the Python probe does.
func newProbe() *probe {
	expected, _ := strconv.Atoi(os.Getenv("BENCH_N"))
	p := &probe{expected: expected, counts: make([]byte, max(expected, 0))}
	p.s.Pid = os.Getpid()
	return p
}

// install opens the socket, says hello and starts the 0.1 s snapshot ticker.
func (p *probe) install() {
	port, _ := strconv.Atoi(os.Getenv("BENCH_UDP_PORT"))
	if port == 0 {
		return
	}
	conn, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		return
	}
	p.conn = conn
	p.send(mustJSON(map[string]any{"hello": os.Getpid(), "t": wallNow()}))
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			p.send(p.snapshotJSON())
		}
	}()
}

func (p *probe) send(b []byte) {
	if p.conn != nil {
		_, _ = p.conn.Write(b)
	}
}

func (p *probe) snapshotJSON() []byte {
	p.mu.Lock()
	s := p.s
	p.mu.Unlock()
	s.TSent = wallNow()
	return mustJSON(s)
}

// begin marks a handler start (only the first one matters: it starts the drain clock).
func (p *probe) begin() {
	p.mu.Lock()
	if p.s.TFirst == 0 {
		p.s.TFirst = wallNow()
	}
	p.mu.Unlock()
}

// started reports this handler's start time at once (latency scenario).
func (p *probe) started(i int) {
	t := wallNow()
	p.begin()
	p.send([]byte(`{"lat":` + strconv.Itoa(i) + `,"t":` + strconv.FormatFloat(t, 'f', -1, 64) + `}`))
}

// done records that the handler for index i finished.
func (p *probe) done(i int) {
	now := wallNow()
	p.mu.Lock()
	if p.s.TFirst == 0 {
		p.s.TFirst = now
	}
	p.s.TLast = now
	p.s.N++
	if i >= 0 && i < p.expected {
		c := p.counts[i]
		if c == 0 {
			p.s.Distinct++
		} else {
			p.s.Over++
		}
		if c < 255 {
			p.counts[i] = c + 1
		}
	} else {
		p.s.OutOfRange++
	}
	reached := p.s.N == p.expected
	p.mu.Unlock()
	if reached {
		p.send(p.snapshotJSON())
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
