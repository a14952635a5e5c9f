package main

// The enqueue command: Go's asynq.Client enqueuing tasks named on standard input, for a
// benchmark that measures what happens to a task Go enqueued (benchmarks/asynq_wire_pickup.py:
// how soon an idle asyncq worker starts it). One line in, "<queue> <task id>", one line out,
// "<task id> <t0>": t0 is the wall time (Unix s) just before Client.Enqueue was called.

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
)

func runEnqueue(args []string) error {
	fs := flag.NewFlagSet("enqueue", flag.ExitOnError)
	url := fs.String("url", "", "Redis URL")
	kind := fs.String("type", "t", "task type")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt, err := asynq.ParseRedisURI(*url)
	if err != nil {
		return err
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		queue, id, ok := strings.Cut(strings.TrimSpace(in.Text()), " ")
		if !ok {
			return fmt.Errorf("want \"<queue> <task id>\", got %q", in.Text())
		}
		t0 := wallNow()
		if _, err := client.Enqueue(asynq.NewTask(*kind, []byte("{}")), asynq.Queue(queue),
			asynq.TaskID(id)); err != nil {
			return err
		}
		fmt.Fprintln(out, id, strconv.FormatFloat(t0, 'f', -1, 64))
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}
