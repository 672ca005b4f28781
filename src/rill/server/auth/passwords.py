"""Password hashing with bcrypt. Hashes only: a plain password is never stored or logged.

Checking a bcrypt hash costs milliseconds of CPU, so the async variants run it in a worker
thread (bcrypt releases the GIL) and the event loop keeps serving other clients.
"""

from __future__ import annotations

import asyncio

import bcrypt

DEFAULT_COST = 10
BCRYPT_INPUT_LIMIT = 72  # bcrypt reads at most 72 bytes; newer bcrypt refuses longer input


def _bcrypt_input(password: str) -> bytes:
    """The password's first 72 UTF-8 bytes (as Iggy's bcrypt, which truncates)."""
    return password.encode("utf-8")[:BCRYPT_INPUT_LIMIT]


def hash_password(password: str, cost: int = DEFAULT_COST) -> str:
    return bcrypt.hashpw(_bcrypt_input(password), bcrypt.gensalt(rounds=cost)).decode("ascii")


def verify_password(password: str, password_hash: str) -> bool:
    try:
        return bcrypt.checkpw(_bcrypt_input(password), password_hash.encode("ascii"))
    except ValueError:  # a malformed stored hash never authenticates
        return False


async def verify_password_async(password: str, password_hash: str) -> bool:
    return await asyncio.get_running_loop().run_in_executor(
        None, verify_password, password, password_hash
    )


async def hash_password_async(password: str, cost: int = DEFAULT_COST) -> str:
    return await asyncio.get_running_loop().run_in_executor(None, hash_password, password, cost)
