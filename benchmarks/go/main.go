// Command asynqbench is the Go peer of asyncq's benchmark suite (python -m benchmarks):
//
//	asynqbench driver --scenario S --url URL --n N ...   one scenario, prints "RESULT {json}"
//	asynqbench worker --url URL --concurrency C          an asynq Server with the bench handlers
//	asynqbench enqueue --url URL                         asynq.Client enqueues "<queue> <id>" lines
//	asynqbench version                                   Go and module versions as JSON
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: asynqbench driver|worker|enqueue|version [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "driver":
		err = runDriver(os.Args[2:])
	case "worker":
		err = runWorker(os.Args[2:])
	case "enqueue":
		err = runEnqueue(os.Args[2:])
	case "version":
		err = printVersions()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "asynqbench:", err)
		os.Exit(1)
	}
}

// printVersions reports what was built in, for the results JSON.
func printVersions() error {
	out := map[string]string{"go": goVersion()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			switch dep.Path {
			case "github.com/hibiken/asynq":
				out["asynq-go"] = dep.Version
				out[dep.Path] = dep.Version
			case "github.com/redis/go-redis/v9", "google.golang.org/protobuf":
				out[dep.Path] = dep.Version
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
