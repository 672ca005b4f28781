"""Connected clients: GET_ME, GET_CLIENT, GET_CLIENTS (wire §3.1, §4.7) and the heartbeat
verifier (wire §1.4).

Owns: answering who is connected (sessions; the Iggy package turns them into ClientInfo
records), and dropping the sessions that went silent. Reads the Core's session registry (client id -> Session), never the sockets.

Rules:
  * All three commands need a login and the server-read rule (global ``read_servers`` or
    ``manage_servers``); a plain user gets 41, even for GET_ME (the §3.1 quirk).
  * GET_CLIENT with id 0 is 101 ``invalid_client_id``; an unknown id is 100 ``client_not_found``.
    The binary handler turns any GET_CLIENT failure into an empty OK, so the asking connection
    is not dropped as it would be after a bare status 100.
  * GET_CLIENTS lists the registered sessions sorted by client id, without group triples.
  * Heartbeat (off by default): every ``interval`` the verifier removes each session whose last
    request (any command, PING included) is older than 1.2 x interval. Removal goes through the
    Core's disconnect path (consumer groups are left), and its connection is closed
    (``Session.close_link``); a request that was already on its way is answered 30
    ``stale_client``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.model import Session
from rill.server.core.state import CoreState

log = logging.getLogger(__name__)

HEARTBEAT_GRACE = 1.2  # a session is stale after this many intervals without a request


class ClientService:
    def __init__(self, state: CoreState, sessions: Mapping[int, Session]) -> None:
        self.state = state
        self.sessions = sessions  # the Core's registry, shared (not copied)

    def get_me(self, session: Session) -> Session:
        self.state.authorize(session, Action.READ_SERVER)
        return session

    def get_client(self, session: Session, client_id: int) -> Session:
        self.state.authorize(session, Action.READ_SERVER)
        if client_id == 0:
            raise errors.InvalidClientId(field="client_id")
        target = self.sessions.get(client_id)
        if target is None:
            raise errors.ClientNotFound(client_id, field="client_id")
        return target

    def get_clients(self, session: Session) -> list[Session]:
        self.state.authorize(session, Action.READ_SERVER)
        return [self.sessions[client_id] for client_id in sorted(self.sessions)]


def stale_sessions(sessions: Mapping[int, Session], now_us: int, interval: float) -> list[Session]:
    """The sessions whose last request is older than 1.2 x ``interval`` seconds at ``now_us``."""
    limit_us = int(interval * HEARTBEAT_GRACE * 1_000_000)
    return [s for s in list(sessions.values()) if now_us - s.last_heartbeat > limit_us]


async def run_heartbeat_verifier(
    state: CoreState,
    sessions: Mapping[int, Session],
    interval: float,
    disconnect: Callable[[Session], None],
) -> None:
    """Every ``interval`` seconds, remove the sessions that sent nothing for 1.2 x interval."""
    while True:
        await asyncio.sleep(interval)
        for session in stale_sessions(sessions, state.clock(), interval):
            log.info(
                "client %d (%s) sent no heartbeat within %.3f s: removed as stale",
                session.client_id, session.address, interval * HEARTBEAT_GRACE,
            )
            disconnect(session)
            if session.close_link is not None:  # and its connection closed
                session.close_link()
