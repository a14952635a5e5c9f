"""Internal helpers for asyncq's own tests and its pytest plugin (asyncq.testing)."""
