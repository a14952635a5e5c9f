package main

// The scenario driver, the Go twin of benchmarks/driver.py: it plays the producer with asynq's
// Client, starts the worker as a separate OS process (this binary's "worker" command), watches
// it through the UDP probe and /proc, and prints one JSON line prefixed "RESULT " with the same
// fields the Python drivers report, so the orchestrator tabulates both alike.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const (
	lib                = "asynq-go"
	pendingKey         = "asynq:{default}:pending" // asynq's pending list of queue "default"
	bulkChunk          = 1000
	enqueueConcurrency = 100
	warmup             = 100
	settle             = time.Second
	blocks             = 5
	// asynq's processor sleeps TaskCheckInterval/2 + rand(TaskCheckInterval) after an empty
	// dequeue, so one idle poll period is at most 1.5 x TaskCheckInterval.
	defaultTaskCheckInterval = time.Second
)

const notes = "asynq (Go) Server and Client with their defaults except Concurrency=100, " +
	"Queues={default: 1} and logging at WARN: an idle server polls (TaskCheckInterval 1 s; each " +
	"empty dequeue sleeps 0.5-1.5 s), completed tasks are deleted (retention 0), MaxRetry 25, " +
	"timeout 30 min. No bulk enqueue API: the bulk row runs each chunk of 1000 through 100 " +
	"goroutines calling Client.Enqueue. Worker CPU from /proc/<pid>/stat, as psutil reads it."

type timeoutError struct{ what string }

func (e timeoutError) Error() string { return e.what }

type options struct {
	scenario, url, loop, logDir, profile string
	n, nBulk, concurrency                int
	deadline, budget, enqueueBudget      float64
	taskCheckInterval                    time.Duration
}

// listener receives the probe's datagrams (hello, snapshots, latency starts).
type listener struct {
	mu      sync.Mutex
	snap    snapshot
	hello   bool
	waiters map[int]chan float64
}

type message struct {
	snapshot
	Lat   *int     `json:"lat"`
	T     float64  `json:"t"`
	Hello *float64 `json:"hello"`
}

func (l *listener) serve(conn *net.UDPConn) {
	buf := make([]byte, 65536)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(buf[:n], &m) != nil {
			continue
		}
		l.mu.Lock()
		switch {
		case m.Lat != nil:
			if ch, ok := l.waiters[*m.Lat]; ok {
				delete(l.waiters, *m.Lat)
				ch <- m.T
			}
		case m.Hello != nil:
			l.hello = true
		case m.N >= l.snap.N:
			l.snap = m.snapshot
		}
		l.mu.Unlock()
	}
}

func (l *listener) current() snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap
}

func (l *listener) expect(i int) chan float64 {
	ch := make(chan float64, 1)
	l.mu.Lock()
	l.waiters[i] = ch
	l.mu.Unlock()
	return ch
}

type driver struct {
	opt     options
	end     time.Time
	client  *asynq.Client
	rdb     *redis.Client // the harness's own connection: counts, INFO, bare EVALSHA
	lst     *listener
	udpPort int
	cmd     *exec.Cmd
	exited  chan struct{}
	result  map[string]any
	ctx     context.Context
}

func (d *driver) left() time.Duration { return time.Until(d.end) }

func (d *driver) checkDeadline(what string) error {
	if d.left() <= 0 {
		return timeoutError{what}
	}
	return nil
}

func pct(values []float64, q float64) float64 {
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	k := max(1, int(math.Ceil(q/100*float64(len(s)))))
	return s[k-1]
}

func newTask(kind string, i int) *asynq.Task {
	b := strconv.AppendInt([]byte(`{"i": `), int64(i), 10)
	return asynq.NewTask(kind, append(b, '}'))
}

// ---------------------------------------------------------------- worker process

func (d *driver) startUDP() error {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	d.lst = &listener{waiters: map[int]chan float64{}}
	d.udpPort = conn.LocalAddr().(*net.UDPAddr).Port
	go d.lst.serve(conn)
	return nil
}

func (d *driver) spawnWorker(expected int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.opt.logDir, 0o755); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(d.opt.logDir, "worker-"+lib+"-"+d.opt.scenario+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"worker", "--url", d.opt.url, "--concurrency", strconv.Itoa(d.opt.concurrency)}
	if d.opt.taskCheckInterval > 0 {
		args = append(args, "--task-check-interval", d.opt.taskCheckInterval.String())
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "BENCH_N="+strconv.Itoa(expected),
		"BENCH_UDP_PORT="+strconv.Itoa(d.udpPort), "BENCH_REDIS_URL="+d.opt.url,
		"BENCH_CONCURRENCY="+strconv.Itoa(d.opt.concurrency))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(d.exited)
	}()
	d.result["worker_pid"] = cmd.Process.Pid
	return nil
}

func (d *driver) workerAlive() bool {
	if d.exited == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// procStat returns the worker's CPU seconds (user + system) and RSS bytes from /proc, which
// is what psutil reads for the Python peers (clock ticks at USER_HZ = 100 on Linux).
func (d *driver) procStat() (cpu float64, rss int64) {
	if d.cmd == nil {
		return math.NaN(), 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return math.NaN(), 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 22 {
		return math.NaN(), 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	return (utime + stime) / 100, pages * int64(os.Getpagesize())
}

func (d *driver) stopWorker() {
	if d.cmd == nil {
		return
	}
	if d.workerAlive() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(5 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	}
	<-d.exited
	code := d.cmd.ProcessState.ExitCode()
	if ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = -int(ws.Signal()) // as Python's returncode says it
	}
	d.result["worker_exit_code"] = code
}

func (d *driver) waitHello() error {
	for {
		d.lst.mu.Lock()
		hello := d.lst.hello
		d.lst.mu.Unlock()
		if hello {
			return nil
		}
		if !d.workerAlive() {
			return errors.New("worker process exited before it started")
		}
		if err := d.checkDeadline("worker start"); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *driver) redisCPU() float64 {
	info, err := d.rdb.Info(d.ctx, "cpu").Result()
	if err != nil {
		return math.NaN()
	}
	total := 0.0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			x, _ := strconv.ParseFloat(v, 64)
			total += x
		}
	}
	return total
}

func (d *driver) stored() (int64, error) {
	return d.rdb.LLen(d.ctx, pendingKey).Result()
}

// ---------------------------------------------------------------- enqueue helpers

func (d *driver) enqueue(kind string, i int) error {
	_, err := d.client.EnqueueContext(d.ctx, newTask(kind, i))
	return err
}

// enqueueConcurrent enqueues indices [from, to) from 100 goroutines calling Client.Enqueue
// (what Go code without a bulk API does). complete is false when budget ran out first.
func (d *driver) enqueueConcurrent(kind string, from, to int, budget time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(d.ctx, max(budget, 10*time.Millisecond))
	defer cancel()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range enqueueConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				if _, err := d.client.EnqueueContext(ctx, newTask(kind, i)); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return false, firstErr
	}
	return ctx.Err() == nil, nil
}

// bareCall is one go-redis EVALSHA of "return 1" (loaded and warmed up): the Redis ceiling
// seen from this process, with the Redis client asynq itself uses.
func (d *driver) bareCall() (func() error, error) {
	sha, err := d.rdb.ScriptLoad(d.ctx, "return 1").Result()
	if err != nil {
		return nil, err
	}
	call := func() error { return d.rdb.EvalSha(d.ctx, sha, nil).Err() }
	for range warmup {
		if err := call(); err != nil {
			return nil, err
		}
	}
	return call, nil
}

// sequential runs call n times one after another, each timed into lat; seconds taken.
func sequential(call func() error, n int, lat *[]float64) (float64, error) {
	t0 := time.Now()
	for range n {
		t := time.Now()
		if err := call(); err != nil {
			return 0, err
		}
		*lat = append(*lat, time.Since(t).Seconds())
	}
	return time.Since(t0).Seconds(), nil
}

// concurrent shares n calls between 100 goroutines, each timed into lat; seconds taken.
func (d *driver) concurrent(call func() error, n int, lat *[]float64) (float64, error) {
	var left atomic.Int64
	left.Store(int64(n))
	per := make([][]float64, enqueueConcurrency)
	errs := make([]error, enqueueConcurrency)
	var wg sync.WaitGroup
	t0 := time.Now()
	for g := range enqueueConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && d.left() > 0 {
				t := time.Now()
				if err := call(); err != nil {
					errs[g] = err
					return
				}
				per[g] = append(per[g], time.Since(t).Seconds())
			}
		}()
	}
	wg.Wait()
	dt := time.Since(t0).Seconds()
	done := 0
	for g := range per {
		*lat = append(*lat, per[g]...)
		done += len(per[g])
		if errs[g] != nil {
			return 0, errs[g]
		}
	}
	if done < n {
		return 0, timeoutError{fmt.Sprintf("%d concurrent calls: %d done", enqueueConcurrency, done)}
	}
	return dt, nil
}

// pipelined is bare EVALSHA pipelined 100 per round trip: ops/s.
func (d *driver) pipelined(n int) (float64, error) {
	sha, err := d.rdb.ScriptLoad(d.ctx, "return 1").Result()
	if err != nil {
		return 0, err
	}
	rounds := max(1, n/enqueueConcurrency)
	t0 := time.Now()
	for range rounds {
		pipe := d.rdb.Pipeline()
		for range enqueueConcurrency {
			pipe.EvalSha(d.ctx, sha, nil)
		}
		if _, err := pipe.Exec(d.ctx); err != nil {
			return 0, err
		}
	}
	return float64(rounds*enqueueConcurrency) / time.Since(t0).Seconds(), nil
}

// preEnqueue fills the queue with n tasks from 100 goroutines (asynq has no bulk API). With a
// budget (> 0) it stops when that runs out and "stored" says how many made it.
func (d *driver) preEnqueue(kind string, n int, budget time.Duration) (map[string]any, error) {
	limit := d.left()
	if budget > 0 {
		limit = min(limit, budget)
	}
	t0 := time.Now()
	complete, err := d.enqueueConcurrent(kind, 0, n, limit)
	if err != nil {
		return nil, err
	}
	dt := time.Since(t0).Seconds()
	if !complete && budget <= 0 {
		return nil, timeoutError{"pre-enqueue"}
	}
	stored, err := d.stored()
	if err != nil {
		return nil, err
	}
	ok := stored > 0
	if complete {
		ok = stored == int64(n)
	}
	return map[string]any{
		"method":  fmt.Sprintf("%d concurrent single enqueues (goroutines)", enqueueConcurrency),
		"seconds": dt, "ops_s": float64(stored) / dt, "stored": stored, "requested": n,
		"complete": complete, "stored_ok": ok}, nil
}

// ---------------------------------------------------------------- drain helpers

// waitDrained waits until n executions were reported; with a non-zero budgetEnd it stops
// there and returns the snapshot so far. sample (if any) runs every 0.2 s meanwhile.
func (d *driver) waitDrained(n int, sample func(), budgetEnd time.Time) (snapshot, error) {
	for {
		s := d.lst.current()
		if s.N >= n {
			return s, nil
		}
		if !budgetEnd.IsZero() && time.Now().After(budgetEnd) {
			return s, nil
		}
		if !d.workerAlive() {
			return s, fmt.Errorf("worker process exited after %d/%d tasks", s.N, n)
		}
		if d.left() <= 0 {
			return s, timeoutError{fmt.Sprintf("drain: %d/%d tasks done", s.N, n)}
		}
		if sample != nil {
			sample()
			time.Sleep(200 * time.Millisecond)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (d *driver) exactlyOnce(s snapshot, expected int) {
	ok := s.N == expected && s.Distinct == expected && s.Over == 0 && s.OutOfRange == 0
	d.result["exactly_once"] = map[string]any{
		"expected": expected, "executions": s.N, "distinct": s.Distinct,
		"duplicates": s.Over, "unknown": s.OutOfRange, "ok": ok}
	if !ok {
		d.result["status"] = "failed-check"
	}
}

func (d *driver) settle() snapshot {
	time.Sleep(settle)
	return d.lst.current()
}

func (d *driver) closeClient() {
	if d.client != nil {
		_ = d.client.Close()
		d.client = nil
	}
}

func (d *driver) drain(kind string, n int) error {
	pre, err := d.preEnqueue(kind, n, 0)
	if err != nil {
		return err
	}
	d.result["pre_enqueue"] = pre
	d.closeClient()
	if !pre["stored_ok"].(bool) {
		d.result["status"] = "failed-check"
	}
	spawnWall := wallNow()
	if err := d.spawnWorker(n); err != nil {
		return err
	}
	if err := d.waitHello(); err != nil {
		return err
	}
	for d.lst.current().N == 0 && d.workerAlive() && d.left() > 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cpu0, _ := d.procStat()
	rcpu0, n0 := d.redisCPU(), d.lst.current().N
	s, err := d.waitDrained(n, nil, time.Time{})
	if err != nil {
		return err
	}
	cpu1, _ := d.procStat()
	rcpu1 := d.redisCPU()
	elapsed := s.TLast - s.TFirst
	res := d.result
	res["seconds"] = elapsed
	if elapsed > 0 {
		res["tasks_s"] = float64(n) / elapsed
	}
	res["wall_from_spawn_s"] = s.TLast - spawnWall
	if n > n0 && !math.IsNaN(cpu0) && !math.IsNaN(cpu1) {
		res["worker_cpu_us_per_task"] = (cpu1 - cpu0) / float64(n-n0) * 1e6
		res["redis_cpu_us_per_task"] = (rcpu1 - rcpu0) / float64(n-n0) * 1e6
	}
	if kind == "sleep" {
		ideal := float64(d.opt.concurrency) / sleepDuration.Seconds()
		res["ideal_tasks_s"] = ideal
		if elapsed > 0 {
			res["pct_ideal"] = 100 * float64(n) / elapsed / ideal
		}
	}
	d.exactlyOnce(d.settle(), n)
	return nil
}

// ---------------------------------------------------------------- scenarios

func (d *driver) scEnqueue() error {
	n := d.opt.n
	res := d.result
	bare, err := d.bareCall()
	if err != nil {
		return err
	}
	for i := range warmup { // connections, script loading
		if err := d.enqueue("noop", n+i); err != nil {
			return err
		}
	}
	index := 0
	enq := func() error {
		index++
		return d.enqueue("noop", index-1)
	}
	// Bare round trips and enqueues alternate in blocks, so a change of load on the machine
	// weighs on both alike.
	per := n / blocks
	n = per * blocks
	var lat, bareLat []float64
	dt, bareDt := 0.0, 0.0
	for range blocks {
		s, err := sequential(bare, per, &bareLat)
		if err != nil {
			return err
		}
		bareDt += s
		if s, err = sequential(enq, per, &lat); err != nil {
			return err
		}
		dt += s
		if err := d.checkDeadline("single enqueue"); err != nil {
			return err
		}
	}
	res["bare_evalsha"] = map[string]any{"script": "return 1", "single_ops_s": float64(n) / bareDt,
		"single_p50_ms": pct(bareLat, 50) * 1000, "single_p99_ms": pct(bareLat, 99) * 1000}
	stored, err := d.stored()
	if err != nil {
		return err
	}
	ok := stored == int64(n+warmup)
	res["single"] = map[string]any{"n": n, "seconds": dt, "ops_s": float64(n) / dt,
		"us_per_op": dt / float64(n) * 1e6, "p50_ms": pct(lat, 50) * 1000,
		"p99_ms": pct(lat, 99) * 1000, "stored": stored, "stored_ok": ok,
		"vs_bare_evalsha": bareDt / dt, "api": "Client.Enqueue, one call at a time"}
	// No bulk API: each chunk of 1000 goes through 100 goroutines calling Client.Enqueue,
	// and the next chunk starts when it is stored (what a Go program does instead).
	if err := d.rdb.FlushAll(d.ctx).Err(); err != nil {
		return err
	}
	nb := d.opt.nBulk
	if _, err := d.enqueueConcurrent("noop", nb, nb+warmup, d.left()); err != nil {
		return err
	}
	t0 := time.Now()
	for start := 0; start < nb; start += bulkChunk {
		complete, err := d.enqueueConcurrent("noop", start, min(start+bulkChunk, nb), d.left())
		if err != nil {
			return err
		}
		if !complete {
			return timeoutError{"bulk enqueue"}
		}
	}
	bdt := time.Since(t0).Seconds()
	if stored, err = d.stored(); err != nil {
		return err
	}
	bulkOK := stored == int64(nb+warmup)
	res["bulk"] = map[string]any{"n": nb, "chunk": bulkChunk, "seconds": bdt,
		"ops_s": float64(nb) / bdt, "stored": stored, "stored_ok": bulkOK,
		"api": fmt.Sprintf("no bulk API: %d goroutines calling Client.Enqueue per chunk of %d",
			enqueueConcurrency, bulkChunk), "substitute": true}
	res["stored_ok"] = ok && bulkOK
	if !(ok && bulkOK) {
		res["status"] = "failed-check"
	}
	return nil
}

// scProducers: 100 goroutines enqueueing at once, next to the same goroutines making bare
// EVALSHA calls and to one caller alone; bare and library measurements alternate in blocks.
func (d *driver) scProducers() error {
	n := d.opt.n
	res := d.result
	per := n / blocks
	n = per * blocks
	nLone := max(500, n/10) / blocks * blocks
	bare, err := d.bareCall()
	if err != nil {
		return err
	}
	res["api"] = "Client.Enqueue from each goroutine (one shared Client)"
	for i := range warmup {
		if err := d.enqueue("noop", n+nLone+i); err != nil {
			return err
		}
	}
	base := n + nLone + warmup
	if _, err := d.enqueueConcurrent("noop", base, base+enqueueConcurrency, d.left()); err != nil {
		return err
	}
	var loneIndex atomic.Int64
	loneIndex.Store(int64(n))
	var index atomic.Int64
	lone := func() error { return d.enqueue("noop", int(loneIndex.Add(1)-1)) }
	overlapping := func() error { return d.enqueue("noop", int(index.Add(1)-1)) }
	var loneLat, bareLone, lat, bareLat []float64
	var dt, bareDt, bareLoneDt float64
	for range blocks {
		steps := []struct {
			conc bool
			call func() error
			n    int
			lat  *[]float64
			acc  *float64
		}{
			{false, bare, nLone / blocks, &bareLone, &bareLoneDt},
			{false, lone, nLone / blocks, &loneLat, nil},
			{true, bare, per, &bareLat, &bareDt},
			{true, overlapping, per, &lat, &dt},
		}
		for _, s := range steps {
			var took float64
			var err error
			if s.conc {
				took, err = d.concurrent(s.call, s.n, s.lat)
			} else {
				took, err = sequential(s.call, s.n, s.lat)
			}
			if err != nil {
				return err
			}
			if s.acc != nil {
				*s.acc += took
			}
		}
	}
	pipelined, err := d.pipelined(n)
	if err != nil {
		return err
	}
	ms := 1000.0
	bareRes := map[string]any{"script": "return 1", "single_ops_s": float64(nLone) / bareLoneDt,
		"single_p99_ms": pct(bareLone, 99) * ms, "concurrent_ops_s": float64(n) / bareDt,
		"concurrent_p50_ms": pct(bareLat, 50) * ms, "concurrent_p99_ms": pct(bareLat, 99) * ms,
		"pipelined_ops_s": pipelined, "pipeline": enqueueConcurrency}
	res["bare_evalsha"] = bareRes
	loneP99 := pct(loneLat, 99)
	res["coroutines"] = enqueueConcurrency
	res["ops_s"] = float64(n) / dt
	res["p50_ms"] = pct(lat, 50) * ms
	res["p99_ms"] = pct(lat, 99) * ms
	res["lone_p50_ms"] = pct(loneLat, 50) * ms
	res["lone_p99_ms"] = loneP99 * ms
	res["vs_bare_evalsha"] = bareDt / dt
	res["p99_vs_lone_p99"] = pct(lat, 99) / loneP99
	res["p99_vs_bare_p99"] = pct(lat, 99) * ms / bareRes["concurrent_p99_ms"].(float64)
	expected := int64(n + nLone + warmup + enqueueConcurrency)
	stored, err := d.stored()
	if err != nil {
		return err
	}
	res["stored"], res["stored_ok"] = stored, stored == expected
	if stored != expected {
		res["status"] = "failed-check"
	}
	return nil
}

func (d *driver) scLatency() error {
	n, warm := d.opt.n, 5
	if err := d.spawnWorker(n + warm); err != nil {
		return err
	}
	if err := d.waitHello(); err != nil {
		return err
	}
	one := func(i int) (t0, t1, ts float64, err error) {
		ch := d.lst.expect(i)
		t0 = wallNow()
		if err = d.enqueue("lat", i); err != nil {
			return
		}
		t1 = wallNow()
		wait := min(max(d.left(), 10*time.Millisecond), 10*time.Second)
		select {
		case ts = <-ch:
		case <-time.After(wait):
			err = timeoutError{fmt.Sprintf("latency: task %d did not start within %s", i, wait)}
		}
		return
	}
	for i := n; i < n+warm; i++ { // the worker is up and has run something
		if _, _, _, err := one(i); err != nil {
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	// The server polls while idle: a random extra gap of up to one poll period (at most
	// 1.5 x TaskCheckInterval) samples its poll phase instead of phase-locking with this loop.
	interval := d.opt.taskCheckInterval
	if interval <= 0 {
		interval = defaultTaskCheckInterval
	}
	poll := 1.5 * interval.Seconds()
	d.result["extra_gap_s"] = poll
	d.result["task_check_interval_s"] = interval.Seconds()
	budgetEnd := time.Now().Add(time.Duration(d.opt.budget * float64(time.Second)))
	var latMs, enqMs []float64
	measured := 0
	var runErr error
	for i := range n {
		if time.Now().After(budgetEnd) {
			d.result["partial"] = fmt.Sprintf("%d/%d samples in %g s", len(latMs), n, d.opt.budget)
			break
		}
		gap := 0.01 + rand.Float64()*0.02 + rand.Float64()*poll
		time.Sleep(time.Duration(gap * float64(time.Second)))
		t0, t1, ts, err := one(i)
		if err != nil {
			runErr = err
			break
		}
		measured++
		latMs = append(latMs, (ts-t0)*1000)
		enqMs = append(enqMs, (t1-t0)*1000)
	}
	d.result["latency_ms"] = latMs
	if len(latMs) > 0 {
		sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
		for _, v := range latMs {
			sum += v
			lo, hi = min(lo, v), max(hi, v)
		}
		d.result["samples"] = len(latMs)
		d.result["p50_ms"], d.result["p90_ms"] = pct(latMs, 50), pct(latMs, 90)
		d.result["p99_ms"], d.result["max_ms"], d.result["min_ms"] = pct(latMs, 99), hi, lo
		d.result["mean_ms"] = sum / float64(len(latMs))
		d.result["enqueue_call_p50_ms"] = pct(enqMs, 50)
	}
	if runErr != nil {
		return runErr
	}
	d.exactlyOnce(d.settle(), measured+warm)
	return nil
}

func (d *driver) scMemory() error {
	n := d.opt.n
	checkpoint := max(1, n/10)
	res := d.result
	res["checkpoint_task"] = checkpoint
	pre, err := d.preEnqueue("noop", n, time.Duration(d.opt.enqueueBudget*float64(time.Second)))
	if err != nil {
		return err
	}
	res["pre_enqueue"] = pre
	d.closeClient()
	stored := int(pre["stored"].(int64))
	if !pre["stored_ok"].(bool) {
		res["status"] = "failed-check"
		return nil
	}
	type sample struct {
		t     float64
		rss   int64
		tasks int
	}
	var samples []sample
	tSpawn := time.Now()
	if err := d.spawnWorker(n); err != nil {
		return err
	}
	take := func() {
		if _, rss := d.procStat(); rss > 0 {
			samples = append(samples, sample{time.Since(tSpawn).Seconds(), rss, d.lst.current().N})
		}
	}
	defer func() { // what Python's summarise_memory reports
		raw := make([][3]float64, len(samples))
		for k, s := range samples {
			raw[k] = [3]float64{math.Round(s.t*1000) / 1000, float64(s.rss), float64(s.tasks)}
		}
		res["samples"] = raw
		if len(samples) == 0 {
			return
		}
		mb := float64(1 << 20)
		start := samples[0]
		for _, s := range samples {
			if s.tasks > 0 {
				start = s
				break
			}
		}
		peak, last := int64(0), samples[len(samples)-1]
		for _, s := range samples {
			peak = max(peak, s.rss)
		}
		res["rss_start_mb"], res["rss_peak_mb"] = float64(start.rss)/mb, float64(peak)/mb
		res["rss_end_mb"], res["rss_end_tasks"] = float64(last.rss)/mb, last.tasks
		for _, s := range samples {
			if s.tasks >= checkpoint {
				ref := float64(s.rss)
				res["rss_checkpoint_mb"] = ref / mb
				res["rss_end_vs_checkpoint_pct"] = 100 * (float64(last.rss) - ref) / ref
				res["flat"] = math.Abs(float64(last.rss)-ref) <= 0.10*ref
				break
			}
		}
	}()
	if err := d.waitHello(); err != nil {
		return err
	}
	budgetEnd := time.Now().Add(time.Duration(d.opt.budget * float64(time.Second)))
	s, err := d.waitDrained(stored, take, budgetEnd)
	if err != nil {
		return err
	}
	for range 10 { // 2 s after the last task: the "after" RSS
		time.Sleep(200 * time.Millisecond)
		take()
	}
	done := s.N
	elapsed := s.TLast - s.TFirst
	res["tasks_done"] = done
	if elapsed > 0 {
		res["tasks_s"] = float64(done) / elapsed
	}
	if done < n {
		why := fmt.Sprintf("drain budget %g s", d.opt.budget)
		if stored < n {
			why = "enqueue budget"
		}
		res["partial"] = fmt.Sprintf("%d/%d tasks (%s)", done, n, why)
	}
	if done >= stored {
		d.exactlyOnce(d.lst.current(), stored)
	} else { // stopped by the budget: every execution so far distinct
		last := d.lst.current()
		ok := last.N == last.Distinct && last.Over == 0
		res["exactly_once"] = map[string]any{"expected": stored, "executions": last.N,
			"distinct": last.Distinct, "duplicates": last.Over, "unknown": last.OutOfRange,
			"ok": ok, "partial": true}
		if !ok {
			res["status"] = "failed-check"
		}
	}
	return nil
}

// skipped scenarios: what asynq has no counterpart for.
var skipped = map[string]string{
	"drain_typed":    "no typed task definitions (handlers take *asynq.Task)",
	"drain_listened": "no task events to listen to",
	"roundtrip":      "no awaitable result API (results are read back with the Inspector)",
}

// ---------------------------------------------------------------- run

func (d *driver) run() {
	err := func() error {
		if reason, ok := skipped[d.opt.scenario]; ok {
			d.result["status"], d.result["error"] = "skipped", reason
			return nil
		}
		if err := d.startUDP(); err != nil {
			return err
		}
		opt, err := asynq.ParseRedisURI(d.opt.url)
		if err != nil {
			return err
		}
		d.client = asynq.NewClient(opt)
		ropt, err := redis.ParseURL(d.opt.url)
		if err != nil {
			return err
		}
		ropt.PoolSize = enqueueConcurrency // one connection per goroutine, as redis-py does
		d.rdb = redis.NewClient(ropt)
		switch d.opt.scenario {
		case "enqueue":
			return d.scEnqueue()
		case "producers":
			return d.scProducers()
		case "drain":
			return d.drain("noop", d.opt.n)
		case "io":
			return d.drain("sleep", d.opt.n)
		case "latency":
			return d.scLatency()
		case "memory":
			return d.scMemory()
		}
		return fmt.Errorf("unknown scenario %q", d.opt.scenario)
	}()
	var te timeoutError
	switch {
	case errors.As(err, &te):
		d.result["status"] = "timeout"
		d.result["error"] = fmt.Sprintf("deadline (%g s) passed during %s", d.opt.deadline, te.what)
	case err != nil:
		d.result["status"] = "error"
		d.result["error"] = err.Error()
	}
	if d.lst != nil && d.cmd != nil {
		d.result["last_snapshot"] = d.lst.current()
	}
	d.stopWorker()
	d.closeClient()
	if d.rdb != nil {
		_ = d.rdb.Close()
	}
}

func runDriver(args []string) error {
	fs := flag.NewFlagSet("driver", flag.ExitOnError)
	var o options
	libName := fs.String("lib", lib, "must be "+lib+" (the orchestrator passes it to every driver)")
	fs.StringVar(&o.scenario, "scenario", "", "scenario name")
	fs.StringVar(&o.url, "url", "", "Redis URL")
	fs.IntVar(&o.n, "n", 0, "tasks")
	fs.IntVar(&o.nBulk, "n-bulk", 20000, "tasks for the bulk enqueue")
	fs.IntVar(&o.concurrency, "concurrency", 100, "worker concurrency")
	fs.Float64Var(&o.deadline, "deadline", 120, "hard limit for the whole scenario (s)")
	fs.Float64Var(&o.budget, "budget", 60, "latency/memory budget (s)")
	fs.Float64Var(&o.enqueueBudget, "enqueue-budget", 60, "memory: pre-enqueue budget (s)")
	fs.StringVar(&o.loop, "loop", "", "ignored: the Python peers' event loop")
	fs.StringVar(&o.logDir, "log-dir", "/tmp/asyncq-bench", "where the worker log goes")
	fs.StringVar(&o.profile, "profile", "", "ignored: py-spy profiles Python only")
	fs.DurationVar(&o.taskCheckInterval, "task-check-interval", 0,
		"the worker's asynq TaskCheckInterval (0: asynq's default, 1 s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if v := os.Getenv("ASYNQ_GO_TASK_CHECK_INTERVAL"); v != "" && o.taskCheckInterval == 0 {
		// An ad-hoc knob for a run that wants to see asynq with a shorter idle poll; the suite
		// itself measures asynq's default.
		interval, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("ASYNQ_GO_TASK_CHECK_INTERVAL: %w", err)
		}
		o.taskCheckInterval = interval
	}
	if *libName != lib {
		return fmt.Errorf("this driver runs %s, not %s", lib, *libName)
	}
	d := &driver{opt: o, ctx: context.Background(),
		end: time.Now().Add(time.Duration(o.deadline * float64(time.Second))),
		result: map[string]any{"lib": lib, "scenario": o.scenario, "n": o.n,
			"concurrency": o.concurrency, "status": "ok", "notes": notes,
			"runtime": "Go " + goVersion() + ", GOMAXPROCS default"}}
	if o.taskCheckInterval > 0 {
		d.result["task_check_interval_s"] = o.taskCheckInterval.Seconds()
	}
	if o.profile != "" {
		d.result["profile_error"] = "py-spy profiles Python workers only"
	}
	d.run()
	out, err := json.Marshal(d.result)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT %s\n", out)
	return nil
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "?"
}
