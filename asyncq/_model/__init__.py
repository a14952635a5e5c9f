"""The task model: what a task is (Task, TaskInfo, TaskState), its options, its stored message and
payload, and the events published when it changes state."""
