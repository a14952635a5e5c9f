"""Helpers shared by asyncq's own tests across directories (import them as
``tests.helpers.<module>``); a helper used by one directory only lives next to its users."""
