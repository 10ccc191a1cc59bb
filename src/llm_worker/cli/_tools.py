"""The demo's and the chat's file tools: read-only, confined to one folder."""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from llm_worker.errors import ToolError
from llm_worker.tools import tool

__all__ = ("FolderTools", "folder_tools")

# Folders of tools and caches: they would drown the listing in files nobody wrote.
_SKIP = {
    ".git",
    ".hg",
    ".venv",
    "venv",
    "__pycache__",
    "node_modules",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".tox",
    ".nox",
    ".idea",
    ".vscode",
}


_DEPTH = 3
_MAX_ENTRIES = 2000


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:  # removed meanwhile
        return 0


class FolderTools:
    """File tools over one folder; a path outside it is refused."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _inside(self, path: str) -> Path:
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise ToolError(
                f"{path!r} is outside the folder {self.root.name!r}; use a relative path"
            )
        return target

    @tool(effect="read_only")
    def list_files(
        self, path: Annotated[str, Field(description="Folder to list, relative")] = "."
    ) -> str:
        """List the files below a folder (three levels deep), with their sizes in bytes."""
        base = self._inside(path)
        if not base.is_dir():
            raise ToolError(f"{path!r} is not a folder")
        lines: list[str] = []
        for folder, dirs, files in os.walk(base):  # does not follow links out of the folder
            here = Path(folder)
            depth = len(here.relative_to(base).parts)
            dirs[:] = sorted(d for d in dirs if d not in _SKIP) if depth < _DEPTH - 1 else []
            lines.extend(f"{(here / d).relative_to(base)}/\t0" for d in dirs)
            lines.extend(f"{(here / f).relative_to(base)}\t{_size(here / f)}" for f in files)
            if len(lines) >= _MAX_ENTRIES:
                lines = sorted(lines)[:_MAX_ENTRIES]
                lines.append(f"… (stopped at {_MAX_ENTRIES} entries)")
                return "\n".join(lines)
        return "\n".join(sorted(lines)) or "(empty folder)"

    @tool(effect="read_only")
    def read_file(self, path: str, max_bytes: int = 20_000) -> str:
        """Read a text file of the folder.

        Args:
            path: The file, relative to the folder.
            max_bytes: Read at most this many bytes.
        """
        target = self._inside(path)
        if not target.is_file():
            raise ToolError(f"no file {path!r}; list_files shows what exists")
        size = _size(target)
        with target.open("rb") as handle:
            data = handle.read(max(1, max_bytes))
        # A cut may fall inside a UTF-8 sequence: an incremental decoder holds that partial
        # character back instead of turning it into U+FFFD.
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)
        if len(data) < size:
            text += f"\n… (first {len(data)} of {size} bytes)"
        return text


def folder_tools(root: Path) -> list[Any]:
    """`list_files` and `read_file` bound to `root`."""
    tools = FolderTools(root)
    return [tools.list_files, tools.read_file]
