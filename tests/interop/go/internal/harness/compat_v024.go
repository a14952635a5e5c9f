//go:build asynq_v024

// Built with -tags asynq_v024 against go.v024.mod (asynq v0.24.1, what asynqmon v0.7.2 links):
// no headers, no TaskCheckInterval or janitor settings. Asking for them is an error, never
// silently dropped.

package harness

import (
	"errors"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

const buildTag = "asynq_v024"

// HasHeaders tells whether this asynq stores task headers (TaskMessage field 15).
const HasHeaders = false

func infoHeaders(t *asynq.TaskInfo) map[string]string { return nil }

// TaskHeaders are a task's headers (none before v0.26).
func TaskHeaders(t *asynq.Task) map[string]string { return nil }

// NewTask builds a task; asynq v0.24 has no headers.
func NewTask(typename string, payload []byte, headers map[string]string) (*asynq.Task, error) {
	if len(headers) > 0 {
		return nil, errors.New("task headers need asynq >= v0.26 (this binary links v0.24)")
	}
	return asynq.NewTask(typename, payload), nil
}

// ServerExtras refuses the Config fields v0.24 lacks.
func ServerExtras(cfg *asynq.Config, taskCheck, janitor time.Duration, janitorBatch int) error {
	if taskCheck != 0 || janitor != 0 || janitorBatch != 0 {
		return errors.New("-task-check-interval, -janitor-interval and -janitor-batch-size need asynq >= v0.25 (this binary links v0.24)")
	}
	return nil
}

// IsHandlerNotFound tells whether err is the ServeMux's "no handler for this type" error
// (v0.24 has no sentinel for it: its text is the only mark).
func IsHandlerNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "handler not found for task")
}
