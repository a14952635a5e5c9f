"""Shared test configuration.

asyncq's pytest plugin (asyncq.testing: redis server, queue-name and client
fixtures) is loaded through the ``pytest11`` entry point of the installed
package (``make venv`` installs it editable), so it is not listed in
``pytest_plugins`` here: registering it twice would be an error.
"""
