"""Workflows: chains, groups and chords of tasks, and ``after=`` dependencies, whose state
lives in Redis and advances exactly once per step outcome (see _engine and _advance)."""

from .._model._flow import Flow
from ._canvas import Step, chain, chord, group
from ._info import WorkflowHandle, WorkflowInfo, WorkflowState, WorkflowStep

__all__ = ["Flow", "Step", "WorkflowHandle", "WorkflowInfo", "WorkflowState", "WorkflowStep",
           "chain", "chord", "group"]
