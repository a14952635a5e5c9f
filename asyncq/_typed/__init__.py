"""Typed task definitions (``@mux.task``): functions enqueued with checked arguments."""

from ._decorator import TaskDecorator
from ._definition import AsyncTaskDefinition, SyncTaskDefinition, TaskDefinition

__all__ = ["AsyncTaskDefinition", "SyncTaskDefinition", "TaskDecorator", "TaskDefinition"]
