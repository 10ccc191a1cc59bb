"""Images and documents as message parts: detection, checks, JSON, and tools returning them."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker import DocumentPart, ImagePart, MediaError, Message, TextPart, ToolResultPart
from llm_worker.collectors import ToolCall
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import messages_from_json, messages_to_json
from llm_worker.tools import execute_call, tool
from support.media import BMP, GIF, HEIC, JPEG, PDF, WEBP, png

PNG = png(2, 2)


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (HEIC, "image/heic"),
    ],
)
def test_an_image_file_gets_the_type_of_its_content_not_of_its_name(
    tmp_path: Path, data: bytes, media_type: str
) -> None:
    path = tmp_path / "misnamed.txt"
    path.write_bytes(data)
    part = ImagePart.from_path(path)
    assert (part.data, part.media_type, part.url) == (data, media_type, None)
    assert ImagePart.from_bytes(data).media_type == media_type


def test_documents_are_pdf_or_utf8_text_and_keep_their_file_name(tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(PDF)
    (tmp_path / "notes.md").write_text("# Notes\nnaïve café ✓\n")
    pdf = DocumentPart.from_path(tmp_path / "report.pdf")
    notes = DocumentPart.from_path(tmp_path / "notes.md")
    assert (pdf.media_type, pdf.name, pdf.data) == ("application/pdf", "report.pdf", PDF)
    assert (notes.media_type, notes.name, notes.text) == (
        "text/plain",
        "notes.md",
        "# Notes\nnaïve café ✓\n",
    )
    text = DocumentPart.from_text("hi", name="a.txt")
    assert text == DocumentPart(b"hi", "text/plain", name="a.txt")


def test_a_file_that_is_not_an_image_is_refused_saying_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(b"\x00\x01binary junk\xff")
    (tmp_path / "scan.bmp").write_bytes(BMP)
    unknown = r"cat\.png is of no known format \(its name says image/png\)"
    with pytest.raises(MediaError, match=unknown):
        ImagePart.from_path(tmp_path / "cat.png")
    with pytest.raises(MediaError, match=r"image/bmp data.*ImagePart takes image/gif, image/heic"):
        ImagePart.from_path(tmp_path / "scan.bmp")
    with pytest.raises(MediaError, match=r"DocumentPart: .* image/png data"):
        DocumentPart.from_bytes(PNG)
    with pytest.raises(FileNotFoundError):
        ImagePart.from_path(tmp_path / "missing.png")


def test_a_declared_media_type_is_checked_against_the_content() -> None:
    with pytest.raises(MediaError, match=r"says image/jpeg, but its content is image/png data"):
        ImagePart.from_bytes(PNG, "image/jpeg")
    with pytest.raises(MediaError, match="says text/plain, but its content is not UTF-8 text"):
        DocumentPart.from_bytes(b"\xff\xfe\x00bad", "text/plain")
    with pytest.raises(MediaError, match=r"ImagePart does not take 'application/pdf'"):
        ImagePart.from_bytes(PDF, "application/pdf")
    assert ImagePart.from_bytes(JPEG, "IMAGE/JPG; q=1").media_type == "image/jpeg"


def test_urls_keep_the_url_and_a_data_url_becomes_bytes() -> None:
    remote = ImagePart.from_url("https://example.com/a/cat.JPG?size=2", detail="low")
    assert (remote.url, remote.data, remote.media_type, remote.detail) == (
        "https://example.com/a/cat.JPG?size=2",
        None,
        "image/jpeg",
        "low",
    )
    assert ImagePart.from_url("https://example.com/render").media_type is None
    encoded = base64.b64encode(PNG).decode()
    inline = ImagePart.from_url(f"data:image/png;base64,{encoded}")
    assert (inline.data, inline.media_type, inline.url) == (PNG, "image/png", None)
    doc = DocumentPart.from_url("https://example.com/files/q3%20report.pdf")
    assert (doc.media_type, doc.name) == ("application/pdf", "q3 report.pdf")
    with pytest.raises(MediaError, match="does not decode"):
        ImagePart.from_url("data:image/png;base64,%%%")
    with pytest.raises(MediaError, match=r"does not take 'text/html'"):
        ImagePart.from_url("https://example.com/x", "text/html")


def test_a_part_needs_exactly_one_source() -> None:
    with pytest.raises(MediaError, match="either data or a url"):
        ImagePart()
    with pytest.raises(MediaError, match="either data or a url"):
        DocumentPart(PDF, "application/pdf", url="https://example.com/x.pdf")


def test_message_user_takes_strings_and_parts_in_order() -> None:
    image = ImagePart.from_bytes(PNG)
    message = Message.user("What is in this picture?", image, "Be brief.")
    assert message.role == "user"
    assert message.content == [TextPart("What is in this picture?"), image, TextPart("Be brief.")]
    assert message.text == "What is in this picture?Be brief."
    assert Message.user("hi") == Message("user", [TextPart("hi")])


def test_bytes_are_standard_base64_in_the_json_and_come_back_exactly() -> None:
    data = PNG + bytes(range(256))  # every byte value: `+` and `/` appear in the base64
    image = ImagePart(data, "image/png", detail="high")
    doc = DocumentPart.from_url("https://example.com/a.pdf")
    result = ToolResultPart("call_1", "the page", name="screenshot", media=[image, doc])
    history = [Message.user("look", image, doc), Message("user", [result])]
    text = messages_to_json(history)
    parsed = orjson.loads(text)
    assert parsed[0]["content"][1] == {
        "data": base64.b64encode(data).decode(),
        "media_type": "image/png",
        "url": None,
        "detail": "high",
        "type": "image",
    }
    assert parsed[1]["content"][0]["media"][1]["url"] == "https://example.com/a.pdf"
    assert messages_from_json(text) == history


def test_bad_media_json_is_an_invalid_messages_error() -> None:
    bad_base64 = r"content\[0\]\.data: Value error, not valid base64"
    with pytest.raises(InvalidMessagesError, match=bad_base64):
        Message.from_dict({"role": "user", "content": [{"type": "image", "data": "a!b"}]})
    with pytest.raises(InvalidMessagesError, match="either data or a url"):
        Message.from_dict({"role": "user", "content": [{"type": "document"}]})


def test_a_repr_never_shows_the_bytes() -> None:
    assert repr(ImagePart(PNG, "image/png")) == f"ImagePart(<{len(PNG)} bytes>, 'image/png')"
    assert repr(DocumentPart.from_url("https://x/a.pdf")) == (
        "DocumentPart('https://x/a.pdf', 'application/pdf', name='a.pdf')"
    )


# -- tools returning images -------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_returning_an_image_gives_a_result_with_media_not_text() -> None:
    shot = ImagePart.from_bytes(PNG)

    @tool
    def screenshot() -> ImagePart:
        """Take a screenshot."""
        return shot

    @tool
    def captioned() -> list[str | ImagePart]:
        """A screenshot with a caption."""
        return ["The login page", shot, "after sign-in"]

    with anyio.fail_after(5):
        alone = await execute_call(screenshot, ToolCall("c1", "screenshot", {}))
        mixed = await execute_call(captioned, ToolCall("c2", "captioned", {}))
    assert (alone.content, alone.media, alone.is_error) == ("", [shot], False)
    assert (mixed.content, mixed.media) == ("The login page\nafter sign-in", [shot])


@pytest.mark.anyio
async def test_a_list_of_other_values_is_still_json_text() -> None:
    @tool
    def numbers() -> list[int]:
        """Numbers."""
        return [1, 2]

    with anyio.fail_after(5):
        result = await execute_call(numbers, ToolCall("c1", "numbers", {}))
    assert (result.content, result.media) == ("[1,2]", [])


def test_the_bytes_of_a_part_are_decoded_once_per_validation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # pydantic tries a part against each media kind: the base64 must not be decoded per kind.
    import binascii

    calls: list[int] = []
    real = binascii.a2b_base64

    def counting(data: str | bytes, *, strict_mode: bool = False) -> bytes:
        calls.append(len(data))
        return real(data, strict_mode=strict_mode)

    history = [Message.user("a", ImagePart.from_bytes(PNG), DocumentPart.from_bytes(PDF))]
    text = messages_to_json(history)
    monkeypatch.setattr(binascii, "a2b_base64", counting)
    assert messages_from_json(text) == history
    assert Message.from_json(messages_to_json(history)[1:-1]) == history[0]
    assert len(calls) == 4  # two parts, two validations


MEDIA_TYPES = ["image/png", "image/jpeg", "image/gif", "application/pdf", "text/plain", "x/y"]


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=64) | st.sampled_from([PNG, JPEG, GIF, PDF, b"%PDF-", b"RIFF"]),
    media_type=st.none() | st.sampled_from(MEDIA_TYPES),
)
def test_any_bytes_make_a_part_or_a_media_error(data: bytes, media_type: str | None) -> None:
    for kind in (ImagePart, DocumentPart):
        try:
            part = kind.from_bytes(data, media_type)
        except MediaError:
            continue
        assert part.data == data and part.media_type is not None
        assert Message.from_json(Message.user(part).to_json()).content == [part]


@settings(max_examples=200, deadline=None)
@given(url=st.text(max_size=40).map(lambda t: "data:" + t) | st.text(max_size=40))
def test_any_url_makes_a_part_or_a_media_error(url: str) -> None:
    for kind in (ImagePart, DocumentPart):
        try:
            part = kind.from_url(url)
        except MediaError:
            continue
        inline = url[:5].lower() == "data:"
        assert (part.url, part.data is not None) == ((None, True) if inline else (url, False))


@settings(max_examples=200, deadline=None)
@given(data=st.text(max_size=24))
def test_any_base64_text_in_json_is_a_part_or_an_invalid_messages_error(data: str) -> None:
    try:
        message = Message.from_dict({"role": "user", "content": [{"type": "image", "data": data}]})
    except InvalidMessagesError as exc:
        assert "not valid base64" in str(exc)  # noqa: PT017 - the error of this input
        return
    [part] = message.content
    assert isinstance(part, ImagePart) and part.data == base64.b64decode(data)
