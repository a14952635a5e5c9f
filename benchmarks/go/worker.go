package main

// The worker process: an asynq Server with the suite's three handlers (noop, sleep, lat),
// written the idiomatic asynq way, each reporting through the probe.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

const sleepDuration = 10 * time.Millisecond // the "sleep" task: what asyncio.sleep(0.01) is

// payload is what every task carries, the same JSON the Python peers send: {"i": <index>}.
type payload struct {
	I int `json:"i"`
}

func taskIndex(t *asynq.Task) (int, error) {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return 0, fmt.Errorf("bad payload %q: %v: %w", t.Payload(), err, asynq.SkipRetry)
	}
	return p.I, nil
}

func runWorker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	url := fs.String("url", "", "Redis URL")
	concurrency := fs.Int("concurrency", 100, "asynq Config.Concurrency")
	taskCheck := fs.Duration("task-check-interval", 0,
		"asynq Config.TaskCheckInterval (0: asynq's default, 1 s)")
	_ = fs.String("loop", "", "ignored (the Python peers' event loop)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt, err := asynq.ParseRedisURI(*url)
	if err != nil {
		return err
	}
	p := newProbe()
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(_ context.Context, t *asynq.Task) error {
		i, err := taskIndex(t)
		if err != nil {
			return err
		}
		p.done(i)
		return nil
	})
	mux.HandleFunc("sleep", func(ctx context.Context, t *asynq.Task) error {
		p.begin()
		i, err := taskIndex(t)
		if err != nil {
			return err
		}
		select {
		case <-time.After(sleepDuration):
		case <-ctx.Done():
			return ctx.Err()
		}
		p.done(i)
		return nil
	})
	mux.HandleFunc("lat", func(_ context.Context, t *asynq.Task) error {
		i, err := taskIndex(t)
		if err != nil {
			return err
		}
		p.started(i)
		p.done(i)
		return nil
	})
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency:       *concurrency,
		Queues:            map[string]int{"default": 1},
		LogLevel:          asynq.WarnLevel,
		TaskCheckInterval: *taskCheck,
	})
	p.install()
	// Run serves until SIGTERM or SIGINT, then shuts down the way asynq does.
	return srv.Run(mux)
}
