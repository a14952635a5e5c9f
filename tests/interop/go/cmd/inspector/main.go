// Command inspector runs one asynq Inspector call and prints its answer as one JSON line:
//
//	{"ok":true,"result":...}                                  exit 0
//	{"ok":false,"error":"...","kind":"task_not_found"|...}    exit 1 (asynq said no)
//
// Usage: inspector -redis URL <command> [flags]. Commands:
//
//	queues                                   queue names
//	queue       -queue Q                     QueueInfo
//	history     -queue Q [-days N]           DailyStats, newest first
//	groups      -queue Q                     GroupInfo list, by name
//	tasks       -queue Q -state S [-group G] [-page-size N] [-page P | -all]
//	            S: pending active scheduled retry archived completed aggregating
//	task        -queue Q -id ID              TaskInfo
//	servers                                  ServerInfo with their active workers
//	scheduler-entries                        SchedulerEntry list
//	scheduler-history -entry ID [-page-size N] [-page P]
//	cancel      -id ID                       CancelProcessing
//	run|archive|delete -queue Q -id ID       RunTask / ArchiveTask / DeleteTask
//	run-all|archive-all|delete-all -queue Q -state S [-group G]
//	pause|unpause -queue Q
//	delete-queue -queue Q [-force]
//	cluster-slot -queue Q                    ClusterKeySlot
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"

	"asyncq/interop/internal/harness"

	"github.com/hibiken/asynq"
)

type queueInfo struct {
	Queue          string   `json:"queue"`
	MemoryUsage    int64    `json:"memory_usage"`
	LatencyS       float64  `json:"latency_s"`
	Size           int      `json:"size"`
	Groups         int      `json:"groups"`
	Pending        int      `json:"pending"`
	Active         int      `json:"active"`
	Scheduled      int      `json:"scheduled"`
	Retry          int      `json:"retry"`
	Archived       int      `json:"archived"`
	Completed      int      `json:"completed"`
	Aggregating    int      `json:"aggregating"`
	Processed      int      `json:"processed"`
	Failed         int      `json:"failed"`
	ProcessedTotal int      `json:"processed_total"`
	FailedTotal    int      `json:"failed_total"`
	Paused         bool     `json:"paused"`
	Timestamp      *float64 `json:"timestamp"`
}

type workerInfo struct {
	TaskID        string   `json:"task_id"`
	TaskType      string   `json:"task_type"`
	PayloadHex    string   `json:"payload_hex"`
	PayloadSha256 string   `json:"payload_sha256"`
	Queue         string   `json:"queue"`
	Started       *float64 `json:"started"`
	Deadline      *float64 `json:"deadline"`
}

type serverInfo struct {
	ID             string         `json:"id"`
	Host           string         `json:"host"`
	PID            int            `json:"pid"`
	Concurrency    int            `json:"concurrency"`
	Queues         map[string]int `json:"queues"`
	StrictPriority bool           `json:"strict_priority"`
	Started        *float64       `json:"started"`
	Status         string         `json:"status"`
	ActiveWorkers  []workerInfo   `json:"active_workers"`
}

type schedulerEntry struct {
	ID         string            `json:"id"`
	Spec       string            `json:"spec"`
	TaskType   string            `json:"task_type"`
	PayloadHex string            `json:"payload_hex"`
	Headers    map[string]string `json:"headers"`
	Opts       []string          `json:"opts"`
	Next       *float64          `json:"next"`
	Prev       *float64          `json:"prev"`
}

type enqueueEvent struct {
	TaskID     string   `json:"task_id"`
	EnqueuedAt *float64 `json:"enqueued_at"`
}

type dailyStats struct {
	Queue     string `json:"queue"`
	Processed int    `json:"processed"`
	Failed    int    `json:"failed"`
	Date      string `json:"date"`
}

func main() {
	fs := flag.NewFlagSet("inspector", flag.ExitOnError)
	conn := harness.AddConnFlags(fs)
	version := fs.Bool("version", false, "print the linked asynq version as JSON and exit")
	_ = fs.Parse(os.Args[1:])
	out := harness.NewLines(os.Stdout)
	if *version {
		out.Emit(harness.BuildVersions())
		return
	}
	if fs.NArg() < 1 {
		harness.Fatal(errors.New("usage: inspector -redis URL <command> [flags] (see the source's doc comment)"))
	}
	cmd := fs.Arg(0)
	sub := flag.NewFlagSet(cmd, flag.ExitOnError)
	queue := sub.String("queue", "", "queue name")
	id := sub.String("id", "", "task id")
	state := sub.String("state", "", "task state")
	group := sub.String("group", "", "group (aggregating tasks)")
	page := sub.Int("page", 1, "page, from 1")
	pageSize := sub.Int("page-size", 30, "tasks per page")
	all := sub.Bool("all", false, "every page")
	days := sub.Int("days", 7, "days of history")
	entry := sub.String("entry", "", "scheduler entry id")
	force := sub.Bool("force", false, "delete-queue even if not empty")
	_ = sub.Parse(fs.Args()[1:])

	opt, err := conn.Opt()
	if err != nil {
		harness.Fatal(err)
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()

	result, err := dispatch(insp, cmd, args{queue: *queue, id: *id, state: *state,
		group: *group, page: *page, pageSize: *pageSize, all: *all, days: *days,
		entry: *entry, force: *force})
	if errors.Is(err, errUsage) {
		harness.Fatal(err)
	}
	if err != nil {
		out.Emit(map[string]interface{}{"ok": false, "error": err.Error(),
			"kind": harness.ErrorKind(err)})
		insp.Close()
		os.Exit(1)
	}
	out.Emit(map[string]interface{}{"ok": true, "result": result})
}

var errUsage = errors.New("usage")

type args struct {
	queue, id, state, group, entry string
	page, pageSize, days           int
	all, force                     bool
}

func need(what string, v string) error {
	if v == "" {
		return fmt.Errorf("%w: -%s is required", errUsage, what)
	}
	return nil
}

func dispatch(insp *asynq.Inspector, cmd string, a args) (interface{}, error) {
	needs := map[string][]string{
		"queue": {"queue"}, "history": {"queue"}, "groups": {"queue"},
		"tasks": {"queue", "state"}, "task": {"queue", "id"}, "cancel": {"id"},
		"run": {"queue", "id"}, "archive": {"queue", "id"}, "delete": {"queue", "id"},
		"run-all": {"queue", "state"}, "archive-all": {"queue", "state"},
		"delete-all": {"queue", "state"}, "pause": {"queue"}, "unpause": {"queue"},
		"delete-queue": {"queue"}, "scheduler-history": {"entry"}, "cluster-slot": {"queue"},
	}
	values := map[string]string{"queue": a.queue, "id": a.id, "state": a.state, "entry": a.entry}
	for _, n := range needs[cmd] {
		if err := need(n, values[n]); err != nil {
			return nil, err
		}
	}
	switch cmd {
	case "queues":
		qs, err := insp.Queues()
		if qs == nil {
			qs = []string{}
		}
		sort.Strings(qs)
		return qs, err
	case "queue":
		q, err := insp.GetQueueInfo(a.queue)
		if err != nil {
			return nil, err
		}
		return queueInfo{Queue: q.Queue, MemoryUsage: q.MemoryUsage,
			LatencyS: q.Latency.Seconds(), Size: q.Size, Groups: q.Groups,
			Pending: q.Pending, Active: q.Active, Scheduled: q.Scheduled, Retry: q.Retry,
			Archived: q.Archived, Completed: q.Completed, Aggregating: q.Aggregating,
			Processed: q.Processed, Failed: q.Failed, ProcessedTotal: q.ProcessedTotal,
			FailedTotal: q.FailedTotal, Paused: q.Paused,
			Timestamp: harness.Unix(q.Timestamp)}, nil
	case "history":
		stats, err := insp.History(a.queue, a.days)
		if err != nil {
			return nil, err
		}
		res := make([]dailyStats, 0, len(stats))
		for _, s := range stats {
			res = append(res, dailyStats{Queue: s.Queue, Processed: s.Processed,
				Failed: s.Failed, Date: s.Date.Format("2006-01-02")})
		}
		return res, nil
	case "groups":
		gs, err := insp.Groups(a.queue)
		if err != nil {
			return nil, err
		}
		sort.Slice(gs, func(i, j int) bool { return gs[i].Group < gs[j].Group })
		res := make([]map[string]interface{}, 0, len(gs))
		for _, g := range gs {
			res = append(res, map[string]interface{}{"group": g.Group, "size": g.Size})
		}
		return res, nil
	case "tasks":
		return listTasks(insp, a)
	case "task":
		t, err := insp.GetTaskInfo(a.queue, a.id)
		if err != nil {
			return nil, err
		}
		return harness.NewTaskInfo(t), nil
	case "servers":
		return servers(insp)
	case "scheduler-entries":
		es, err := insp.SchedulerEntries()
		if err != nil {
			return nil, err
		}
		res := make([]schedulerEntry, 0, len(es))
		for _, e := range es {
			opts := make([]string, 0, len(e.Opts))
			for _, o := range e.Opts {
				opts = append(opts, o.String())
			}
			res = append(res, schedulerEntry{ID: e.ID, Spec: e.Spec, TaskType: e.Task.Type(),
				PayloadHex: harness.Hex(e.Task.Payload()), Headers: harness.TaskHeaders(e.Task),
				Opts: opts, Next: harness.Unix(e.Next), Prev: harness.Unix(e.Prev)})
		}
		return res, nil
	case "scheduler-history":
		evs, err := insp.ListSchedulerEnqueueEvents(a.entry, asynq.PageSize(a.pageSize),
			asynq.Page(a.page))
		if err != nil {
			return nil, err
		}
		res := make([]enqueueEvent, 0, len(evs))
		for _, e := range evs {
			res = append(res, enqueueEvent{TaskID: e.TaskID, EnqueuedAt: harness.Unix(e.EnqueuedAt)})
		}
		return res, nil
	case "cancel":
		return nil, insp.CancelProcessing(a.id)
	case "run":
		return nil, insp.RunTask(a.queue, a.id)
	case "archive":
		return nil, insp.ArchiveTask(a.queue, a.id)
	case "delete":
		return nil, insp.DeleteTask(a.queue, a.id)
	case "run-all", "archive-all", "delete-all":
		return bulk(insp, cmd, a)
	case "pause":
		return nil, insp.PauseQueue(a.queue)
	case "unpause":
		return nil, insp.UnpauseQueue(a.queue)
	case "delete-queue":
		return nil, insp.DeleteQueue(a.queue, a.force)
	case "cluster-slot":
		return insp.ClusterKeySlot(a.queue)
	default:
		return nil, fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

func listTasks(insp *asynq.Inspector, a args) (interface{}, error) {
	list := func(opts ...asynq.ListOption) ([]*asynq.TaskInfo, error) {
		switch a.state {
		case "pending":
			return insp.ListPendingTasks(a.queue, opts...)
		case "active":
			return insp.ListActiveTasks(a.queue, opts...)
		case "scheduled":
			return insp.ListScheduledTasks(a.queue, opts...)
		case "retry":
			return insp.ListRetryTasks(a.queue, opts...)
		case "archived":
			return insp.ListArchivedTasks(a.queue, opts...)
		case "completed":
			return insp.ListCompletedTasks(a.queue, opts...)
		case "aggregating":
			if a.group == "" {
				return nil, fmt.Errorf("%w: -group is required for aggregating tasks", errUsage)
			}
			return insp.ListAggregatingTasks(a.queue, a.group, opts...)
		default:
			return nil, fmt.Errorf("%w: unknown state %q", errUsage, a.state)
		}
	}
	if !a.all {
		ts, err := list(asynq.PageSize(a.pageSize), asynq.Page(a.page))
		return harness.NewTaskInfos(ts), err
	}
	size := a.pageSize
	if size < 1000 {
		size = 1000
	}
	var res []harness.TaskInfo
	for p := 1; ; p++ {
		ts, err := list(asynq.PageSize(size), asynq.Page(p))
		if err != nil {
			return nil, err
		}
		res = append(res, harness.NewTaskInfos(ts)...)
		if len(ts) < size {
			break
		}
	}
	if res == nil {
		res = []harness.TaskInfo{}
	}
	return res, nil
}

func bulk(insp *asynq.Inspector, cmd string, a args) (interface{}, error) {
	type op func(string) (int, error)
	groupOp := func(f func(string, string) (int, error)) op {
		return func(q string) (int, error) {
			if a.group == "" {
				return 0, fmt.Errorf("%w: -group is required for aggregating tasks", errUsage)
			}
			return f(q, a.group)
		}
	}
	ops := map[string]map[string]op{
		"run-all": {"scheduled": insp.RunAllScheduledTasks, "retry": insp.RunAllRetryTasks,
			"archived": insp.RunAllArchivedTasks, "aggregating": groupOp(insp.RunAllAggregatingTasks)},
		"archive-all": {"pending": insp.ArchiveAllPendingTasks,
			"scheduled": insp.ArchiveAllScheduledTasks, "retry": insp.ArchiveAllRetryTasks,
			"aggregating": groupOp(insp.ArchiveAllAggregatingTasks)},
		"delete-all": {"pending": insp.DeleteAllPendingTasks,
			"scheduled": insp.DeleteAllScheduledTasks, "retry": insp.DeleteAllRetryTasks,
			"archived": insp.DeleteAllArchivedTasks, "completed": insp.DeleteAllCompletedTasks,
			"aggregating": groupOp(insp.DeleteAllAggregatingTasks)},
	}
	f, ok := ops[cmd][a.state]
	if !ok {
		return nil, fmt.Errorf("%w: %s does not take state %q", errUsage, cmd, a.state)
	}
	n, err := f(a.queue)
	return map[string]int{"count": n}, err
}

func servers(insp *asynq.Inspector) (interface{}, error) {
	ss, err := insp.Servers()
	if err != nil {
		return nil, err
	}
	res := make([]serverInfo, 0, len(ss))
	for _, s := range ss {
		ws := make([]workerInfo, 0, len(s.ActiveWorkers))
		for _, w := range s.ActiveWorkers {
			ws = append(ws, workerInfo{TaskID: w.TaskID, TaskType: w.TaskType,
				PayloadHex: harness.Hex(w.TaskPayload), PayloadSha256: harness.Sha256Hex(w.TaskPayload),
				Queue: w.Queue, Started: harness.Unix(w.Started), Deadline: harness.Unix(w.Deadline)})
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i].TaskID < ws[j].TaskID })
		res = append(res, serverInfo{ID: s.ID, Host: s.Host, PID: s.PID,
			Concurrency: s.Concurrency, Queues: s.Queues, StrictPriority: s.StrictPriority,
			Started: harness.Unix(s.Started), Status: s.Status, ActiveWorkers: ws})
	}
	sort.Slice(res, func(i, j int) bool { return res[i].ID < res[j].ID })
	return res, nil
}
