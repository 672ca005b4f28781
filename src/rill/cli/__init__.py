"""The ``rill`` command-line tool."""
