// Command producer enqueues tasks with asynq's Client and prints one JSON line per task:
//
//	{"event":"enqueued","i":0,"enqueued_at":<unix s>,"task":{TaskInfo}}
//	{"event":"error","i":3,"error":"...","kind":"duplicate_task"|"task_id_conflict"|"other"}
//
// then {"event":"summary",...}. Tasks come either from JSON lines on standard input (-stdin;
// one Spec a line) or from the flags (-n copies of one template; with -payload-size each gets
// its own deterministic payload, see harness.GenPayload). -rate paces the enqueues (tasks per
// second), for -n tasks or for -duration. An enqueue error is a result, not a failure: the
// exit status is 0 unless the arguments or the connection are bad (2).
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"asyncq/interop/internal/harness"

	"github.com/hibiken/asynq"
)

// Spec is one task to enqueue (a line of -stdin, or built from the flags). Durations are Go
// duration strings ("30s"); Deadline and ProcessAt are Unix seconds.
type Spec struct {
	I           *int              `json:"i,omitempty"`
	Type        string            `json:"type"`
	PayloadHex  *string           `json:"payload_hex,omitempty"`
	PayloadB64  *string           `json:"payload_b64,omitempty"`
	PayloadSize *int              `json:"payload_size,omitempty"`
	Seed        string            `json:"seed,omitempty"`
	Queue       string            `json:"queue,omitempty"`
	MaxRetry    *int              `json:"max_retry,omitempty"`
	Timeout     string            `json:"timeout,omitempty"`
	Deadline    *float64          `json:"deadline,omitempty"`
	ProcessIn   string            `json:"process_in,omitempty"`
	ProcessAt   *float64          `json:"process_at,omitempty"`
	Unique      string            `json:"unique,omitempty"`
	TaskID      string            `json:"task_id,omitempty"`
	Group       string            `json:"group,omitempty"`
	Retention   string            `json:"retention,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// job is a Spec resolved into what Enqueue takes.
type job struct {
	i    int
	task *asynq.Task
	opts []asynq.Option
}

func (s *Spec) payload(i int) ([]byte, error) {
	switch {
	case s.PayloadHex != nil:
		return hex.DecodeString(*s.PayloadHex)
	case s.PayloadB64 != nil:
		return base64.StdEncoding.DecodeString(*s.PayloadB64)
	case s.PayloadSize != nil:
		seed := s.Seed
		if seed == "" {
			seed = "asyncq"
		}
		return harness.GenPayload(seed, i, *s.PayloadSize), nil
	default:
		return nil, nil
	}
}

func (s *Spec) resolve(i int) (job, error) {
	if s.I != nil {
		i = *s.I
	}
	if s.Type == "" {
		return job{}, fmt.Errorf("task %d: type is required", i)
	}
	payload, err := s.payload(i)
	if err != nil {
		return job{}, fmt.Errorf("task %d: payload: %w", i, err)
	}
	task, err := harness.NewTask(s.Type, payload, s.Headers)
	if err != nil {
		return job{}, fmt.Errorf("task %d: %w", i, err)
	}
	var opts []asynq.Option
	if s.Queue != "" {
		opts = append(opts, asynq.Queue(s.Queue))
	}
	if s.MaxRetry != nil {
		opts = append(opts, asynq.MaxRetry(*s.MaxRetry))
	}
	durations := []struct {
		text string
		opt  func(time.Duration) asynq.Option
		name string
	}{
		{s.Timeout, asynq.Timeout, "timeout"},
		{s.ProcessIn, asynq.ProcessIn, "process_in"},
		{s.Unique, asynq.Unique, "unique"},
		{s.Retention, asynq.Retention, "retention"},
	}
	for _, d := range durations {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return job{}, fmt.Errorf("task %d: %s: %w", i, d.name, err)
		}
		opts = append(opts, d.opt(v))
	}
	if s.Deadline != nil {
		opts = append(opts, asynq.Deadline(harness.FromUnix(*s.Deadline)))
	}
	if s.ProcessAt != nil {
		opts = append(opts, asynq.ProcessAt(harness.FromUnix(*s.ProcessAt)))
	}
	if s.TaskID != "" {
		opts = append(opts, asynq.TaskID(s.TaskID))
	}
	if s.Group != "" {
		opts = append(opts, asynq.Group(s.Group))
	}
	return job{i: i, task: task, opts: opts}, nil
}

type headerFlag map[string]string

func (h headerFlag) String() string { return fmt.Sprint(map[string]string(h)) }
func (h headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("header %q: want key=value", v)
	}
	h[k] = val
	return nil
}

func main() {
	fs := flag.NewFlagSet("producer", flag.ExitOnError)
	conn := harness.AddConnFlags(fs)
	version := fs.Bool("version", false, "print the linked asynq version as JSON and exit")
	stdin := fs.Bool("stdin", false, "read one JSON Spec a line from standard input")
	n := fs.Int("n", 1, "number of tasks built from the flags")
	typ := fs.String("type", "ok", "task type")
	queue := fs.String("queue", "", "queue (asynq's default: \"default\")")
	payloadHex := fs.String("payload-hex", "", "the same payload for every task, hex")
	payloadB64 := fs.String("payload-b64", "", "the same payload for every task, base64")
	payloadSize := fs.Int("payload-size", -1, "a deterministic payload of this many bytes per task (harness.GenPayload)")
	seed := fs.String("seed", "asyncq", "seed of the generated payloads")
	maxRetry := fs.Int("max-retry", -1, "MaxRetry (-1: asynq's default, 25)")
	timeout := fs.String("timeout", "", "Timeout, a Go duration")
	deadline := fs.Float64("deadline", 0, "Deadline, Unix seconds")
	processIn := fs.String("process-in", "", "ProcessIn, a Go duration")
	processAt := fs.Float64("process-at", 0, "ProcessAt, Unix seconds")
	unique := fs.String("unique", "", "Unique TTL, a Go duration")
	taskID := fs.String("task-id", "", "TaskID (with -n > 1, -task-id-prefix instead)")
	taskIDPrefix := fs.String("task-id-prefix", "", "TaskID = prefix + index")
	group := fs.String("group", "", "Group")
	retention := fs.String("retention", "", "Retention, a Go duration")
	headers := headerFlag{}
	fs.Var(headers, "header", "key=value header (repeatable; asynq >= v0.26)")
	rate := fs.Float64("rate", 0, "enqueues per second (0: as fast as possible)")
	duration := fs.Duration("duration", 0, "with -rate: enqueue for this long instead of -n tasks")
	concurrency := fs.Int("concurrency", 1, "parallel enqueuers")
	quiet := fs.Bool("quiet", false, "print only errors and the summary")
	_ = fs.Parse(os.Args[1:])

	if *version {
		harness.NewLines(os.Stdout).Emit(harness.BuildVersions())
		return
	}
	opt, err := conn.Opt()
	if err != nil {
		harness.Fatal(err)
	}

	var specs func(yield func(int, *Spec) bool)
	if *stdin {
		list, err := readSpecs()
		if err != nil {
			harness.Fatal(err)
		}
		specs = func(yield func(int, *Spec) bool) {
			for i, s := range list {
				if !yield(i, s) {
					return
				}
			}
		}
	} else {
		template := Spec{Type: *typ, Queue: *queue, Seed: *seed, Timeout: *timeout,
			ProcessIn: *processIn, Unique: *unique, Group: *group, Retention: *retention,
			Headers: headers}
		switch {
		case *payloadSize >= 0:
			template.PayloadSize = payloadSize
		case *payloadHex != "":
			template.PayloadHex = payloadHex
		case *payloadB64 != "":
			template.PayloadB64 = payloadB64
		}
		if *maxRetry >= 0 {
			template.MaxRetry = maxRetry
		}
		if *deadline != 0 {
			template.Deadline = deadline
		}
		if *processAt != 0 {
			template.ProcessAt = processAt
		}
		if *taskID != "" && *n > 1 {
			harness.Fatal(errors.New("-task-id with -n > 1 would conflict: use -task-id-prefix"))
		}
		count := *n
		if *duration > 0 {
			if *rate <= 0 {
				harness.Fatal(errors.New("-duration needs -rate"))
			}
			count = -1
		}
		specs = func(yield func(int, *Spec) bool) {
			for i := 0; count < 0 || i < count; i++ {
				s := template
				switch {
				case *taskIDPrefix != "":
					s.TaskID = fmt.Sprintf("%s%d", *taskIDPrefix, i)
				case *taskID != "":
					s.TaskID = *taskID
				}
				if !yield(i, &s) {
					return
				}
			}
		}
	}

	client := asynq.NewClient(opt)
	defer client.Close()
	out := harness.NewLines(os.Stdout)
	summary := run(client, out, specs, *rate, *duration, *concurrency, *quiet)
	out.Emit(summary)
}

func readSpecs() ([]*Spec, error) {
	var list []*Spec
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		s := &Spec{}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(s); err != nil {
			return nil, fmt.Errorf("spec line %d: %w", len(list), err)
		}
		list = append(list, s)
	}
	return list, sc.Err()
}

type summary struct {
	Event     string           `json:"event"`
	Enqueued  int              `json:"enqueued"`
	Errors    int              `json:"errors"`
	ByKind    map[string]int   `json:"errors_by_kind"`
	ElapsedS  float64          `json:"elapsed_s"`
	PerSecond float64          `json:"per_second"`
	Versions  harness.Versions `json:"versions"`
}

func run(client *asynq.Client, out *harness.Lines, specs func(func(int, *Spec) bool),
	rate float64, duration time.Duration, concurrency int, quiet bool) summary {
	if concurrency < 1 {
		concurrency = 1
	}
	jobs := make(chan job, concurrency)
	var mu sync.Mutex
	res := summary{Event: "summary", ByKind: map[string]int{}, Versions: harness.BuildVersions()}
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				info, err := client.EnqueueContext(context.Background(), j.task, j.opts...)
				now := time.Now()
				mu.Lock()
				if err != nil {
					res.Errors++
					res.ByKind[harness.ErrorKind(err)]++
				} else {
					res.Enqueued++
				}
				mu.Unlock()
				switch {
				case err != nil:
					out.Emit(map[string]interface{}{"event": "error", "i": j.i,
						"error": err.Error(), "kind": harness.ErrorKind(err)})
				case !quiet:
					out.Emit(map[string]interface{}{"event": "enqueued", "i": j.i,
						"enqueued_at": harness.Unix(now), "task": harness.NewTaskInfo(info)})
				}
			}
		}()
	}
	start := time.Now()
	var stop time.Time
	if duration > 0 {
		stop = start.Add(duration)
	}
	k := 0
	specs(func(i int, s *Spec) bool {
		if rate > 0 {
			due := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
			if !stop.IsZero() && !due.Before(stop) {
				return false
			}
			time.Sleep(time.Until(due))
		}
		k++
		j, err := s.resolve(i)
		if err != nil {
			harness.Fatal(err)
		}
		jobs <- j
		return true
	})
	close(jobs)
	wg.Wait()
	res.ElapsedS = time.Since(start).Seconds()
	if res.ElapsedS > 0 {
		res.PerSecond = float64(res.Enqueued) / res.ElapsedS
	}
	return res
}
