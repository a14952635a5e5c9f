"""Importable handler modules that tests run in worker subprocesses (``asyncq worker ...``)."""
