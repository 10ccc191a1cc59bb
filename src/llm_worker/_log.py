"""The library's loggers, made at their first record: `import llm_worker` does not load logging.

`logging` brings `traceback`, `threading` and `string` with it: about a tenth of what
importing the package and building a client cost (≈ 21 M instructions of ≈ 310 M), for
records that most runs never write. Each module holds `_log = logger("llm_worker.x")`, a
stand-in with the methods the library calls; the named `logging.Logger` is looked up at the
first of them, and each record is handed on to it as the module's own (`stacklevel` counts
this layer, so a record's file, line and function are the caller's, as before).

The names are those users configure (`llm_worker`, `llm_worker.retries`, …). The first logger
made gives the package's root logger `llm_worker` its `NullHandler` (the library convention of
the logging HOWTO: without a configuration, a record must not reach Python's last-resort
handler on stderr), before that logger's first record; a user's handlers and levels on any of
these names receive the records as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import logging
    from collections.abc import Mapping
    from types import TracebackType

    _SysExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
    _ExcInfo = bool | BaseException | _SysExcInfo | tuple[None, None, None] | None

__all__ = ("DEBUG", "WARNING", "Logger", "logger")

DEBUG: Final = 10
"""`logging.DEBUG`, without importing logging."""
WARNING: Final = 30
"""`logging.WARNING`, without importing logging."""

ROOT: Final = "llm_worker"


class Logger:
    """One of the library's named loggers, made at its first record."""

    __slots__ = ("_logger", "name")

    def __init__(self, name: str) -> None:
        """Stand for the logger called `name` (looked up at the first record)."""
        self.name = name
        self._logger: logging.Logger | None = None

    @property
    def logger(self) -> logging.Logger:
        """The `logging.Logger` of this name (made now if it was not yet)."""
        found = self._logger
        if found is None:
            found = self._logger = _named(self.name)
        return found

    def log(
        self,
        level: int,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        extra: Mapping[str, object] | None = None,
        stacklevel: int = 1,
    ) -> None:
        """`logging.Logger.log`, the record the caller's."""
        self.logger.log(
            level, msg, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel + 1
        )

    def debug(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        extra: Mapping[str, object] | None = None,
        stacklevel: int = 1,
    ) -> None:
        """`logging.Logger.debug`, the record the caller's."""
        self.logger.debug(msg, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel + 1)

    def info(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        extra: Mapping[str, object] | None = None,
        stacklevel: int = 1,
    ) -> None:
        """`logging.Logger.info`, the record the caller's."""
        self.logger.info(msg, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel + 1)

    def warning(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        extra: Mapping[str, object] | None = None,
        stacklevel: int = 1,
    ) -> None:
        """`logging.Logger.warning`, the record the caller's."""
        self.logger.warning(msg, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel + 1)

    def error(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        extra: Mapping[str, object] | None = None,
        stacklevel: int = 1,
    ) -> None:
        """`logging.Logger.error`, the record the caller's."""
        self.logger.error(msg, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel + 1)

    def __repr__(self) -> str:
        return f"<llm_worker logger {self.name!r}>"


def logger(name: str) -> Logger:
    """The library's logger `name` (`llm_worker` or below it), made at its first record."""
    return Logger(name)


_rooted = False


def _named(name: str) -> logging.Logger:
    global _rooted  # noqa: PLW0603 (once per process: the package logger's NullHandler)
    import logging  # here, at the first record: the point of this module

    if not _rooted:
        # Checked, not assumed: a second interpreter state or a reload must not stack them.
        root = logging.getLogger(ROOT)
        if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
            root.addHandler(logging.NullHandler())
        _rooted = True
    return logging.getLogger(name)
