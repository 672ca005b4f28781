"""The HTTP JSON transport: the same Core as TCP, with JSON in place of the binary codec.

``HttpListener`` (listener.py) runs the app of ``create_app`` (app.py) under uvicorn in the
server's own event loop.
"""

from rill.server.transports.http.app import create_app
from rill.server.transports.http.listener import HttpListener

__all__ = ["HttpListener", "create_app"]
