//go:build !asynq_v024

// What asynq v0.25/v0.26 have and v0.24 lacks: task headers (v0.26), the server's
// TaskCheckInterval and janitor settings (v0.25). compat_v024.go is the other side.

package harness

import (
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

const buildTag = ""

// HasHeaders tells whether this asynq stores task headers (TaskMessage field 15).
const HasHeaders = true

func infoHeaders(t *asynq.TaskInfo) map[string]string { return t.Headers }

// TaskHeaders are a task's headers (none before v0.26).
func TaskHeaders(t *asynq.Task) map[string]string { return t.Headers() }

// NewTask builds a task, with headers when there are any.
func NewTask(typename string, payload []byte, headers map[string]string) (*asynq.Task, error) {
	if len(headers) > 0 {
		return asynq.NewTaskWithHeaders(typename, payload, headers), nil
	}
	return asynq.NewTask(typename, payload), nil
}

// ServerExtras sets the Config fields added in v0.25 (zero: asynq's default).
func ServerExtras(cfg *asynq.Config, taskCheck, janitor time.Duration, janitorBatch int) error {
	cfg.TaskCheckInterval = taskCheck
	cfg.JanitorInterval = janitor
	cfg.JanitorBatchSize = janitorBatch
	return nil
}

// IsHandlerNotFound tells whether err is the ServeMux's "no handler for this type" error.
func IsHandlerNotFound(err error) bool { return errors.Is(err, asynq.ErrHandlerNotFound) }
