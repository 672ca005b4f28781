"""The command table (wire §2 request codes): exactly the 44 codes of the seed list, plus
rill's extensions (docs/extensions.md) outside Iggy's ranges."""

from __future__ import annotations

import re

from rill.protocol.iggy import codes
from rill.protocol.iggy.commands.base import Command


def test_exactly_the_seed_codes_and_the_extensions() -> None:
    assert len(codes.COMMANDS) == 44 + 12
    assert codes.IGGY_CODES <= set(codes.COMMANDS)
    assert codes.EXTENSION_CODES == {1000, 1001, 1010, 1011, 1012, 1013, 1020, 1030, 1031, 1040,
                                    1041, 1050}
    assert all(code >= 1000 for code in codes.EXTENSION_CODES)  # outside Iggy's ranges


def test_names_unique_and_snake_case() -> None:
    names = [cls.NAME for cls in codes.COMMANDS.values()]
    assert len(set(names)) == len(names) == 56
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", name) for name in names)
    assert set(codes.COMMANDS_BY_NAME) == set(names)
    for cls in codes.COMMANDS.values():
        camel = "".join(part.capitalize() for part in cls.NAME.split("_"))
        assert cls.__name__ == camel, (cls.__name__, cls.NAME)


def test_table_is_consistent() -> None:
    for code, cls in codes.COMMANDS.items():
        assert issubclass(cls, Command) and cls.CODE == code
        assert codes.COMMANDS_BY_NAME[cls.NAME] is cls
    assert codes.COMMANDS[11].NAME == "get_snapshot"
    assert codes.COMMANDS[38].NAME == "login_user"
    assert codes.COMMANDS[42].NAME == "create_personal_access_token"
