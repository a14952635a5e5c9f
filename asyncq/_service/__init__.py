"""Running background services: their loops, backoff and outage reporting, signals, lifecycle."""
