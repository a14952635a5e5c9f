"""Producing: the Client that enqueues tasks, waits for their outcome and cancels them."""
