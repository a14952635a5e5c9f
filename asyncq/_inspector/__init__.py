"""Inspecting: the Inspector and what it returns, for operators, the CLI and the dashboard."""
