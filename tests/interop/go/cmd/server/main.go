// Command server runs an asynq.Server whose handlers behave by task type, and writes a ledger:
// one JSON line when a run starts and one when it ends (see runRecord), to -ledger.
//
// Task types (the part before the first ':' picks the behaviour, the rest is free):
//
//	ok[:...]          returns nil
//	fail[:...]        returns an error (retried, then archived)
//	failn:<n>[:...]   fails while the task's retry count is below n, then returns nil
//	skip[:...]        returns an error wrapping asynq.SkipRetry (archived at once)
//	sleep:<ms>[:...]  sleeps ms milliseconds, or returns ctx.Err() when ctx ends first
//	result[:...]      writes the payload back as the task's result, returns nil
//	hang[:...]        blocks until ctx ends (timeout, deadline, CancelProcessing, shutdown)
//	panic[:...]       panics
//	aggregated        the task the -aggregate aggregator makes of a group; returns nil
//
// Any other type gets asynq's handler-not-found error. Lifecycle lines go to standard output:
// {"event":"started",...} once the server runs, {"event":"stopped",...} after a SIGTERM or
// SIGINT shut it down (SIGTSTP stops fetching, as asynq's Run does).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"asyncq/interop/internal/harness"

	"github.com/hibiken/asynq"
)

// runRecord is one ledger line: event "start" when a handler is entered, "end" when it
// returns (or panics). Both carry what identifies the run.
type runRecord struct {
	Event         string            `json:"event"`
	ID            string            `json:"id"`
	Type          string            `json:"type"`
	Queue         string            `json:"queue"`
	PayloadLen    int               `json:"payload_len"`
	PayloadSha256 string            `json:"payload_sha256"`
	PayloadHex    *string           `json:"payload_hex"`
	Headers       map[string]string `json:"headers"`
	Retried       int               `json:"retried"`
	MaxRetry      int               `json:"max_retry"`
	Deadline      *float64          `json:"deadline"`
	Started       *float64          `json:"started"`
	Ended         *float64          `json:"ended,omitempty"`
	ElapsedS      *float64          `json:"elapsed_s,omitempty"`
	Outcome       string            `json:"outcome,omitempty"`
	Error         string            `json:"error,omitempty"`
	PID           int               `json:"pid"`
}

type recorder struct {
	ledger     *harness.Lines
	payloadMax int
}

func (r *recorder) middleware(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) (err error) {
		rec := runRecord{Event: "start", Type: t.Type(), PayloadLen: len(t.Payload()),
			PayloadSha256: harness.Sha256Hex(t.Payload()), Headers: harness.TaskHeaders(t),
			PID: os.Getpid()}
		rec.ID, _ = asynq.GetTaskID(ctx)
		rec.Queue, _ = asynq.GetQueueName(ctx)
		rec.Retried, _ = asynq.GetRetryCount(ctx)
		rec.MaxRetry, _ = asynq.GetMaxRetry(ctx)
		if d, ok := ctx.Deadline(); ok {
			rec.Deadline = harness.Unix(d)
		}
		if len(t.Payload()) <= r.payloadMax {
			h := harness.Hex(t.Payload())
			rec.PayloadHex = &h
		}
		start := time.Now()
		rec.Started = harness.Unix(start)
		r.ledger.Emit(rec)
		defer func() {
			end := time.Now()
			elapsed := end.Sub(start).Seconds()
			rec.Event, rec.Ended, rec.ElapsedS = "end", harness.Unix(end), &elapsed
			if x := recover(); x != nil {
				rec.Outcome, rec.Error = "panic", fmt.Sprint(x)
				r.ledger.Emit(rec)
				panic(x) // asynq's processor recovers it and fails the task
			}
			rec.Outcome = outcome(err)
			if err != nil {
				rec.Error = err.Error()
			}
			r.ledger.Emit(rec)
		}()
		return next.ProcessTask(ctx, t)
	})
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, asynq.SkipRetry):
		return "skip"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case harness.IsHandlerNotFound(err):
		return "not_found"
	default:
		return "error"
	}
}

// arg is the n-th ':'-separated part of the type, as an int.
func arg(t *asynq.Task, n int) (int, error) {
	parts := strings.Split(t.Type(), ":")
	if len(parts) <= n {
		return 0, fmt.Errorf("task type %q: want an argument after ':'", t.Type())
	}
	return strconv.Atoi(parts[n])
}

func wait(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newMux(r *recorder) *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(r.middleware)
	mux.HandleFunc("ok", func(ctx context.Context, t *asynq.Task) error { return nil })
	mux.HandleFunc("aggregated", func(ctx context.Context, t *asynq.Task) error { return nil })
	mux.HandleFunc("fail", func(ctx context.Context, t *asynq.Task) error {
		return errors.New("fail: the handler failed on purpose")
	})
	mux.HandleFunc("failn:", func(ctx context.Context, t *asynq.Task) error {
		n, err := arg(t, 1)
		if err != nil {
			return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
		}
		if retried, _ := asynq.GetRetryCount(ctx); retried < n {
			return fmt.Errorf("failn: attempt %d of %d failing on purpose", retried+1, n)
		}
		return nil
	})
	mux.HandleFunc("skip", func(ctx context.Context, t *asynq.Task) error {
		return fmt.Errorf("skip: no retry on purpose: %w", asynq.SkipRetry)
	})
	mux.HandleFunc("sleep:", func(ctx context.Context, t *asynq.Task) error {
		ms, err := arg(t, 1)
		if err != nil {
			return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
		}
		return wait(ctx, time.Duration(ms)*time.Millisecond)
	})
	mux.HandleFunc("result", func(ctx context.Context, t *asynq.Task) error {
		_, err := t.ResultWriter().Write(t.Payload())
		return err
	})
	mux.HandleFunc("hang", func(ctx context.Context, t *asynq.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	mux.HandleFunc("panic", func(ctx context.Context, t *asynq.Task) error {
		panic("panic: the handler panicked on purpose")
	})
	return mux
}

// aggregate makes one "aggregated" task of a group's tasks; its payload is JSON
// {"group":..., "count":n, "ids":[...], "payloads_hex":[...]} (ids are not known to an
// aggregator in asynq: the list is the members' payloads, in the order asynq gave them).
func aggregate(group string, tasks []*asynq.Task) *asynq.Task {
	payloads := make([]string, 0, len(tasks))
	for _, t := range tasks {
		payloads = append(payloads, harness.Hex(t.Payload()))
	}
	b, _ := json.Marshal(map[string]interface{}{"group": group, "count": len(tasks),
		"payloads_hex": payloads})
	return asynq.NewTask("aggregated", b)
}

func parseQueues(s string) (map[string]int, error) {
	queues := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		name, weight, found := strings.Cut(strings.TrimSpace(part), "=")
		w := 1
		if found {
			var err error
			if w, err = strconv.Atoi(weight); err != nil || w < 1 {
				return nil, fmt.Errorf("queue %q: weight must be a positive integer", part)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("bad -queues %q", s)
		}
		queues[name] = w
	}
	return queues, nil
}

func main() {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	conn := harness.AddConnFlags(fs)
	version := fs.Bool("version", false, "print the linked asynq version as JSON and exit")
	queuesFlag := fs.String("queues", "default=1", "name=weight,... served")
	strict := fs.Bool("strict", false, "StrictPriority")
	concurrency := fs.Int("concurrency", 10, "Concurrency")
	ledgerPath := fs.String("ledger", "-", "where run records go (file appended to; -: standard output)")
	payloadMax := fs.Int("ledger-payload-max", 65536, "payloads up to this size are written to the ledger in hex")
	shutdown := fs.Duration("shutdown-timeout", 0, "ShutdownTimeout (0: asynq's 8s)")
	delayed := fs.Duration("delayed-check", 0, "DelayedTaskCheckInterval (0: asynq's 5s)")
	health := fs.Duration("healthcheck-interval", 0, "HealthCheckInterval; also logs each check as a health event")
	taskCheck := fs.Duration("task-check-interval", 0, "TaskCheckInterval (asynq >= v0.25; 0: its 1s)")
	janitor := fs.Duration("janitor-interval", 0, "JanitorInterval (asynq >= v0.25; 0: its 8s)")
	janitorBatch := fs.Int("janitor-batch-size", 0, "JanitorBatchSize (asynq >= v0.25)")
	retryDelay := fs.Duration("retry-delay", -1, "a fixed RetryDelayFunc (-1: asynq's default formula)")
	aggregateOn := fs.Bool("aggregate", false, "set a GroupAggregator making an \"aggregated\" task of each group")
	grace := fs.Duration("group-grace", 0, "GroupGracePeriod (0: asynq's 1m; at least 1s)")
	maxDelay := fs.Duration("group-max-delay", 0, "GroupMaxDelay")
	maxSize := fs.Int("group-max-size", 0, "GroupMaxSize")
	logLevel := fs.String("log-level", "info", "asynq's log level (debug, info, warn, error)")
	_ = fs.Parse(os.Args[1:])

	out := harness.NewLines(os.Stdout)
	if *version {
		out.Emit(harness.BuildVersions())
		return
	}
	opt, err := conn.Opt()
	if err != nil {
		harness.Fatal(err)
	}
	queues, err := parseQueues(*queuesFlag)
	if err != nil {
		harness.Fatal(err)
	}
	ledger, closeLedger, err := harness.OpenLedger(*ledgerPath)
	if err != nil {
		harness.Fatal(err)
	}
	defer closeLedger()
	var level asynq.LogLevel
	if err := level.Set(*logLevel); err != nil {
		harness.Fatal(err)
	}

	cfg := asynq.Config{
		Concurrency: *concurrency, Queues: queues, StrictPriority: *strict,
		ShutdownTimeout: *shutdown, DelayedTaskCheckInterval: *delayed,
		GroupGracePeriod: *grace, GroupMaxDelay: *maxDelay, GroupMaxSize: *maxSize,
		LogLevel: level,
	}
	if err := harness.ServerExtras(&cfg, *taskCheck, *janitor, *janitorBatch); err != nil {
		harness.Fatal(err)
	}
	if *health > 0 {
		cfg.HealthCheckInterval = *health
		cfg.HealthCheckFunc = func(err error) {
			ev := map[string]interface{}{"event": "health", "ok": err == nil}
			if err != nil {
				ev["error"] = err.Error()
			}
			out.Emit(ev)
		}
	}
	if *retryDelay >= 0 {
		d := *retryDelay
		cfg.RetryDelayFunc = func(n int, e error, t *asynq.Task) time.Duration { return d }
	}
	if *aggregateOn {
		cfg.GroupAggregator = asynq.GroupAggregatorFunc(aggregate)
	}

	srv := asynq.NewServer(opt, cfg)
	rec := &recorder{ledger: ledger, payloadMax: *payloadMax}
	if err := srv.Start(newMux(rec)); err != nil {
		harness.Fatal(err)
	}
	out.Emit(map[string]interface{}{"event": "started", "pid": os.Getpid(),
		"queues": queues, "concurrency": *concurrency, "versions": harness.BuildVersions()})

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGTSTP)
	for sig := range sigs {
		if sig == syscall.SIGTSTP {
			srv.Stop()
			out.Emit(map[string]interface{}{"event": "stopped_fetching"})
			continue
		}
		out.Emit(map[string]interface{}{"event": "stopping", "signal": sig.String()})
		start := time.Now()
		srv.Shutdown()
		out.Emit(map[string]interface{}{"event": "stopped", "shutdown_s": time.Since(start).Seconds()})
		return
	}
}
