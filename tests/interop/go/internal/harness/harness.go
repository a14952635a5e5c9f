// Package harness holds what the interop programs (producer, server, inspector) share: the
// Redis connection flags, the JSON shapes they print, deterministic payloads and the JSON-lines
// writer. Everything printed is meant to be read by pytest (tests/interop/conftest.py).
//
// JSON conventions: times are Unix seconds as floats (null when Go's value is the zero time),
// durations are seconds as floats, byte strings are lowercase hex.
package harness

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// AsynqModule is the import path whose version every program reports.
const AsynqModule = "github.com/hibiken/asynq"

// ---------------------------------------------------------------- connection

// Conn is the Redis a program talks to: one server (-redis URL) or a Cluster (-cluster).
type Conn struct {
	URL     string
	Cluster string
}

// AddConnFlags registers -redis and -cluster on fs.
func AddConnFlags(fs *flag.FlagSet) *Conn {
	c := &Conn{}
	fs.StringVar(&c.URL, "redis", "", "redis://[:password@]host:port/db (a query string such as ?wire=asynq is ignored)")
	fs.StringVar(&c.Cluster, "cluster", "", "comma-separated host:port of Redis Cluster nodes (instead of -redis)")
	return c
}

// Opt is the asynq connection option for the flags given.
func (c *Conn) Opt() (asynq.RedisConnOpt, error) {
	if c.Cluster != "" {
		if c.URL != "" {
			return nil, errors.New("give -redis or -cluster, not both")
		}
		return asynq.RedisClusterClientOpt{Addrs: strings.Split(c.Cluster, ",")}, nil
	}
	if c.URL == "" {
		return nil, errors.New("-redis URL (or -cluster addresses) is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("bad -redis URL: %w", err)
	}
	// asyncq selects its wire format with a query option; asynq has none to read.
	u.RawQuery = ""
	return asynq.ParseRedisURI(u.String())
}

// ---------------------------------------------------------------- versions

// Versions names the asynq release and Go toolchain a binary was built with.
type Versions struct {
	Asynq string `json:"asynq"`
	Go    string `json:"go"`
	Tag   string `json:"build_tag"`
}

// BuildVersions reads the module versions linked into this binary.
func BuildVersions() Versions {
	v := Versions{Asynq: "unknown", Go: runtime.Version(), Tag: buildTag}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == AsynqModule {
				v.Asynq = dep.Version
			}
		}
	}
	return v
}

// ---------------------------------------------------------------- JSON shapes

// Unix is t as Unix seconds, or nil for Go's zero time (asynq's "not set").
func Unix(t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	f := float64(t.UnixNano()) / 1e9
	return &f
}

// FromUnix turns Unix seconds into a time.
func FromUnix(s float64) time.Time {
	return time.Unix(0, int64(s*1e9))
}

// Hex is b as lowercase hex ("" for none).
func Hex(b []byte) string { return hex.EncodeToString(b) }

// Sha256Hex is the SHA-256 of b, hex.
func Sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TaskInfo is asynq.TaskInfo as printed.
type TaskInfo struct {
	ID            string            `json:"id"`
	Queue         string            `json:"queue"`
	Type          string            `json:"type"`
	PayloadHex    string            `json:"payload_hex"`
	PayloadSha256 string            `json:"payload_sha256"`
	Headers       map[string]string `json:"headers"`
	State         string            `json:"state"`
	MaxRetry      int               `json:"max_retry"`
	Retried       int               `json:"retried"`
	LastErr       string            `json:"last_err"`
	LastFailedAt  *float64          `json:"last_failed_at"`
	TimeoutS      float64           `json:"timeout_s"`
	Deadline      *float64          `json:"deadline"`
	Group         string            `json:"group"`
	NextProcessAt *float64          `json:"next_process_at"`
	IsOrphaned    bool              `json:"is_orphaned"`
	RetentionS    float64           `json:"retention_s"`
	CompletedAt   *float64          `json:"completed_at"`
	ResultHex     string            `json:"result_hex"`
}

// NewTaskInfo converts an asynq.TaskInfo.
func NewTaskInfo(t *asynq.TaskInfo) TaskInfo {
	return TaskInfo{
		ID: t.ID, Queue: t.Queue, Type: t.Type,
		PayloadHex: Hex(t.Payload), PayloadSha256: Sha256Hex(t.Payload),
		Headers: infoHeaders(t), State: t.State.String(),
		MaxRetry: t.MaxRetry, Retried: t.Retried, LastErr: t.LastErr,
		LastFailedAt: Unix(t.LastFailedAt), TimeoutS: t.Timeout.Seconds(),
		Deadline: Unix(t.Deadline), Group: t.Group, NextProcessAt: Unix(t.NextProcessAt),
		IsOrphaned: t.IsOrphaned, RetentionS: t.Retention.Seconds(),
		CompletedAt: Unix(t.CompletedAt), ResultHex: Hex(t.Result),
	}
}

// NewTaskInfos converts a list.
func NewTaskInfos(ts []*asynq.TaskInfo) []TaskInfo {
	out := make([]TaskInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, NewTaskInfo(t))
	}
	return out
}

// ErrorKind names the asynq sentinel error err wraps, for tests to assert on.
func ErrorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, asynq.ErrDuplicateTask):
		return "duplicate_task"
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return "task_id_conflict"
	case errors.Is(err, asynq.ErrTaskNotFound):
		return "task_not_found"
	case errors.Is(err, asynq.ErrQueueNotFound):
		return "queue_not_found"
	case errors.Is(err, asynq.ErrQueueNotEmpty):
		return "queue_not_empty"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	default:
		return "other"
	}
}

// ---------------------------------------------------------------- payloads

// GenPayload is the deterministic payload number i of a seed: SHA-256("<seed>:<i>"), then
// SHA-256 of the previous block, concatenated and cut to size bytes. Every byte value occurs,
// so the bytes are binary, not text; tests/interop/conftest.py computes the same.
func GenPayload(seed string, i int, size int) []byte {
	out := make([]byte, 0, size+sha256.Size)
	block := sha256.Sum256([]byte(fmt.Sprintf("%s:%d", seed, i)))
	for len(out) < size {
		out = append(out, block[:]...)
		block = sha256.Sum256(block[:])
	}
	return out[:size]
}

// ---------------------------------------------------------------- output

// Lines writes JSON documents, one a line, safe for concurrent use; every line is flushed
// with one write, so a reader (or a SIGKILL) never sees half a line.
type Lines struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewLines writes to w.
func NewLines(w io.Writer) *Lines { return &Lines{w: w} }

// Emit writes v as one JSON line.
func (l *Lines) Emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"event": "marshal_error", "error": err.Error()})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf[:0], b...), '\n')
	_, _ = l.w.Write(l.buf)
}

// OpenLedger opens path for appending ("" or "-": standard output).
func OpenLedger(path string) (*Lines, func() error, error) {
	if path == "" || path == "-" {
		return NewLines(os.Stdout), func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return NewLines(f), f.Close, nil
}

// Fatal prints {"event":"fatal","error":...} on standard output, the reason on standard
// error, and exits 2 (bad usage or no connection: not a result to assert on).
func Fatal(err error) {
	NewLines(os.Stdout).Emit(map[string]string{"event": "fatal", "error": err.Error()})
	w := bufio.NewWriter(os.Stderr)
	fmt.Fprintln(w, "fatal:", err)
	_ = w.Flush()
	os.Exit(2)
}

// Duration parses a Go duration ("1500ms", "30s"); "" is zero.
func Duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}
