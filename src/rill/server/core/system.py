"""System commands: ping (wire §3.1)."""

from __future__ import annotations

from rill.protocol.commands.system import Ping
from rill.server.core.model import Session
from rill.server.core.state import CoreState


class SystemService:
    def __init__(self, state: CoreState) -> None:
        self.state = state

    def ping(self, session: Session, command: Ping) -> None:
        return None
