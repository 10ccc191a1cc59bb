"""`--image PATH` / `--file PATH`: files attached to the prompt of `run` and `chat`."""

from __future__ import annotations

import argparse
from pathlib import Path

from llm_worker._sniff import IMAGE_TYPES, sniff
from llm_worker.errors import ConfigurationError
from llm_worker.messages import DocumentPart, ImagePart, MediaPart, Message

__all__ = ("add_options", "attached", "describe", "prompt_message")


def add_options(cmd: argparse.ArgumentParser) -> None:
    """The `--image` and `--file` options; both append to `args.attach`, in command-line order."""
    cmd.add_argument(
        "--image",
        dest="attach",
        action="append",
        type=lambda path: ("image", path),
        metavar="PATH",
        help="attach an image (PNG, JPEG, GIF, WebP, HEIC); may be repeated",
    )
    cmd.add_argument(
        "--file",
        dest="attach",
        action="append",
        type=lambda path: ("file", path),
        metavar="PATH",
        help="attach a file: a PDF, a text file or an image; may be repeated",
    )


def attached(args: argparse.Namespace) -> list[MediaPart]:
    """The parts of the files `--image` / `--file` name, read and checked now.

    Raises:
        ConfigurationError: A file cannot be read.
        MediaError: A file is not an image (`--image`), or neither a PDF, text nor an image.
    """
    pairs: list[tuple[str, str]] = getattr(args, "attach", None) or []
    return [_part(kind, Path(path)) for kind, path in pairs]


def _part(kind: str, path: Path) -> MediaPart:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read --{kind} {path}: {exc.strerror or exc}") from exc
    if kind == "image":
        return ImagePart.from_path(path)  # its errors name the file
    if sniff(data) in IMAGE_TYPES:
        return ImagePart.from_bytes(data)
    return DocumentPart.from_path(path)


def prompt_message(prompt: str, parts: list[MediaPart]) -> str | Message:
    """The prompt as sent: the text alone, or a user message of the text and the files."""
    return Message.user(prompt, *parts) if parts else prompt


def describe(args: argparse.Namespace, parts: list[MediaPart]) -> str:
    """One line naming what is attached (`attached: paper.pdf (application/pdf, 12 KB)`)."""
    pairs: list[tuple[str, str]] = getattr(args, "attach", None) or []
    shown = [
        f"{Path(path).name} ({part.media_type}, {_size(len(part.data or b''))})"
        for (_, path), part in zip(pairs, parts, strict=True)
    ]
    return "attached: " + ", ".join(shown)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.0f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"
