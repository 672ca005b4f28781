"""Plain command-line values without pydantic: the CLI's start-up cost.

Owns: how the CLI's parameters turn their text into values when the text is plainly valid.
typer (0.2x) coerces every parameter through a pydantic ``TypeAdapter`` built for it, which
imports pydantic and generates a schema per parameter: about as much CPU as the rest of a
``rill message send`` together. Nearly every value the CLI takes is a string, a whole number
or a list of them, so ``install()`` wraps typer's per-parameter coercion: a missing value, a
``str``, a flag's ``bool``, an ``int``/``float`` (or its text when it is a plain number) inside
the parameter's ``min``/``max``, and lists of those are converted here; anything else (a custom
parser, an enum, a path, a date, a number out of range or malformed, a flag's text from the
environment) goes to typer's own coercion, built when first needed, so
its checks and error messages stay typer's. tests/cli/test_startup.py guards that a command
does not import pydantic; the CLI's other tests guard that the values are the same.
"""

from __future__ import annotations

import re
from typing import Any, get_args, get_origin

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class _Fallback(Exception):
    """The value is not plainly valid: typer's own coercion decides."""


def _leaf(annotation: Any, info: Any, value: Any) -> Any:
    """``value`` as ``annotation`` when plainly valid, else ``_Fallback``."""
    if annotation is str and isinstance(value, str):
        return value
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation in (int, float) and not isinstance(value, bool):
        if isinstance(value, annotation):  # a default
            number = value
        elif isinstance(value, str) and (_INTEGER if annotation is int else _DECIMAL).fullmatch(value):
            number = annotation(value)
        else:
            raise _Fallback
        if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
            raise _Fallback  # typer's message for an out-of-range value
        return number
    raise _Fallback


def _plain_shape(descriptor: Any) -> Any | None:
    """The leaf type when this parameter can be coerced here (str, int, float, bool, or a list
    of one), else None."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None or info.clamp:
        return None
    annotation = descriptor.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    return annotation if annotation in (str, int, float, bool) else None


def install() -> None:
    """Wrap typer's parameter coercion once (idempotent)."""
    from typer.core import _TyperParameter

    if getattr(_TyperParameter, "plain_values", False):
        return
    typer_coerce = _TyperParameter.process_value

    def process_value(self: Any, ctx: Any, value: Any) -> Any:
        leaf = _plain_shape(self.type_descriptor)
        if leaf is None:
            return typer_coerce(self, ctx, value)
        try:
            if value is None:
                coerced: Any = () if (self.multiple or self.nargs == -1) else None
            elif get_origin(self.type_descriptor.annotation) is list:
                if isinstance(value, str):
                    raise _Fallback
                coerced = [_leaf(leaf, self.type_descriptor.parameter_info, item) for item in value]
            else:
                coerced = _leaf(leaf, self.type_descriptor.parameter_info, value)
        except _Fallback:
            return typer_coerce(self, ctx, value)
        if self.required and self.value_is_missing(coerced):
            return typer_coerce(self, ctx, value)  # typer's "missing parameter" error
        if self.callback is not None:
            coerced = self.callback(ctx, self, coerced)
        return coerced

    _TyperParameter.process_value = process_value
    _TyperParameter.plain_values = True
