"""Integrations of asyncq with other frameworks, each imported only by the projects that use it
(``asyncq.contrib.django``: a Django Tasks backend and its worker command)."""
