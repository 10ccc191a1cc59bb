"""The summaries of stored outputs: the exact forms of SPEC §9, byte bounds, edge cases."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker import Content, OutputPolicy, ToolOutput
from llm_worker.blobs import StoredOutput, summarize

ID = "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a"
TAG = f"[blob:{ID}]"


def summary_of(text: str, policy: OutputPolicy | None = None) -> str:
    """The summary of `text` as promotion would store it (text or JSON)."""
    out = ToolOutput.from_string(text, threshold=0)
    assert isinstance(out, StoredOutput)
    return summarize(ID, out.content, policy)


def within(summary: str, max_bytes: int = 400) -> None:
    data = summary.encode("utf-8")  # raises on a lone surrogate: a summary never has one
    assert len(data) <= max_bytes


# -- the three forms, exactly ------------------------------------------------------------------


def test_text_form() -> None:
    text = "\n".join(f"l{i}" for i in range(1, 21)) + "\n"
    assert summary_of(text) == "\n".join(
        [
            f"{TAG} text | 20 lines",
            "── head ──",
            "l1",
            "l2",
            "l3",
            "l4",
            "l5",
            "── tail ──",
            "l18",
            "l19",
            "l20",
        ]
    )


def test_json_array_form() -> None:
    entries = [{"a": 1, "b": "x", "c": [1], "d": {"e": None}, "f": 1.5, "g": True}] * 3
    assert summary_of(json.dumps(entries)) == "\n".join(
        [
            f"{TAG} json_array | 3 entries",
            "── schema ──",
            "a: integer, b: string, c: array, d: object, f: number, g: boolean",
            "── head ──",
            '{"a":1,"b":"x","c":[1],"d":{"e":null},"f":1.5,"g":true}',
            '{"a":1,"b":"x","c":[1],"d":{"e":null},"f":1.5,"g":true}',
        ]
    )


def test_json_object_form() -> None:
    value = {
        "results": [1, 2, 3],
        "meta": {"k": 1, "j": 2},
        "name": "abc",
        "n": 1.5,
        "ok": False,
        "none": None,
        "count": 3,
    }
    assert summary_of(json.dumps(value)) == "\n".join(
        [
            f"{TAG} json_object | 7 keys",
            "── keys ──",
            "results: array (3 entries)",
            "meta: object (2 keys)",
            "name: string (3 chars)",
            "n: number",
            "ok: boolean",
            "none: null",
            "count: integer",
        ]
    )


def test_a_value_and_its_json_text_summarize_alike() -> None:
    value = {"rows": [{"id": i} for i in range(50)], "total": 50}
    assert summarize(ID, Content.Structured(value)) == summary_of(json.dumps(value))
    rows = value["rows"]
    assert summarize(ID, Content.Structured(rows)) == summary_of(json.dumps(rows))


# -- edge cases --------------------------------------------------------------------------------


def test_empty_text() -> None:
    assert summarize(ID, Content.Text("")) == f"{TAG} text | 0 lines"
    assert summarize(ID, Content.Text("\n")) == f"{TAG} text | 1 lines\n── head ──\n"


def test_fewer_lines_than_head_and_tail_shows_each_once() -> None:
    three = summarize(ID, Content.Text("a\nb\nc"))
    assert three == f"{TAG} text | 3 lines\n── head ──\na\nb\nc"
    seven = summarize(ID, Content.Text("1\n2\n3\n4\n5\n6\n7\n"))
    assert seven == f"{TAG} text | 7 lines\n── head ──\n1\n2\n3\n4\n5\n── tail ──\n6\n7"
    nine = summarize(ID, Content.Text("\n".join("123456789")))
    assert nine.endswith("── head ──\n1\n2\n3\n4\n5\n── tail ──\n7\n8\n9")


def test_crlf_lines_lose_their_carriage_return() -> None:
    summary = summarize(ID, Content.Text("a\r\nb\r\n"))
    assert summary == f"{TAG} text | 2 lines\n── head ──\na\nb"


def test_one_huge_line() -> None:
    text = "z" * 10_000_000
    start = time.perf_counter()
    summary = summarize(ID, Content.Text(text))
    assert time.perf_counter() - start < 1.0
    within(summary)
    header, title, line = summary.split("\n")
    assert (header, title) == (f"{TAG} text | 1 lines", "── head ──")
    assert line.endswith("…") and set(line[:-1]) == {"z"} and len(line) > 250


def test_long_lines_share_the_room_and_short_ones_stay_whole() -> None:
    lines = ["short"] + ["L" * 2_000] * 4 + ["s2"] + ["M" * 500] * 2
    summary = summarize(ID, Content.Text("\n".join(lines)))
    within(summary)
    shown = summary.split("\n")
    assert shown[2] == "short" and shown[-3] == "s2"
    cut = [line for line in shown if line.endswith("…")]
    assert len(cut) == 6
    assert max(len(line) for line in cut) - min(len(line) for line in cut) <= 1  # fair shares


def test_japanese_text_is_cut_on_character_boundaries() -> None:
    line = "日本語のテキストです。" * 40
    summary = summarize(ID, Content.Text("\n".join([line] * 20)))
    within(summary)
    for shown in summary.split("\n")[2:]:
        if shown.startswith("──"):
            continue
        assert shown.endswith("…") and line.startswith(shown[:-1])


def test_emoji_are_cut_on_character_boundaries() -> None:
    line = "😀🎉👍🏽" * 100
    summary = summarize(ID, Content.Text("\n".join([line] * 9)))
    within(summary)
    body = [s for s in summary.split("\n")[1:] if not s.startswith("──")]
    assert len(body) == 8 and all(s.endswith("…") and line.startswith(s[:-1]) for s in body)


def test_lone_surrogates_never_reach_a_summary() -> None:
    summary = summarize(ID, Content.Text("bad \ud800 char\n" * 10))
    within(summary)
    assert "bad ? char" in summary


def test_empty_array_and_object() -> None:
    assert summarize(ID, Content.Structured([])) == f"{TAG} json_array | 0 entries"
    assert summarize(ID, Content.Structured({})) == f"{TAG} json_object | 0 keys"


def test_array_of_scalars() -> None:
    assert summary_of(json.dumps(list(range(1000)))) == "\n".join(
        [f"{TAG} json_array | 1000 entries", "── schema ──", "integer", "── head ──", "0", "1"]
    )
    strings = summary_of(json.dumps(["s" * 1000] * 3))
    within(strings)
    assert strings.split("\n")[2] == "string"


def test_array_of_mixed_and_nested_entries() -> None:
    summary = summary_of(json.dumps([[1, 2], {"a": 1}, None] * 100))
    assert summary.split("\n")[2] == "array"
    assert summary.split("\n")[4:] == ["[1,2]", '{"a":1}']
    assert summary_of(json.dumps([{}] * 500)).split("\n")[2] == "(no keys)"


def test_deep_objects_are_described_not_unfolded() -> None:
    deep: Any = "bottom"
    for i in range(200):
        deep = {f"level{i}": deep, "pad": "p" * 10}
    summary = summarize(ID, Content.Structured(deep))
    assert summary.split("\n") == [
        f"{TAG} json_object | 2 keys",
        "── keys ──",
        "level199: object (2 keys)",
        "pad: string (10 chars)",
    ]
    rows = summary_of(json.dumps([deep] * 3))
    within(rows)
    assert rows.split("\n")[2] == "level199: object, pad: string"


def test_many_keys_end_with_a_count_of_the_rest() -> None:
    value = {f"key_{i:04}": i for i in range(1000)}
    summary = summary_of(json.dumps(value))
    within(summary)
    lines = summary.split("\n")
    assert lines[:3] == [f"{TAG} json_object | 1000 keys", "── keys ──", "key_0000: integer"]
    shown = len(lines) - 3
    assert shown > 5 and lines[-1] == f"… +{1000 - shown} more keys"


def test_keys_that_do_not_print_are_quoted() -> None:
    summary = summarize(ID, Content.Structured({"a\nb": 1, "tab\there": [1]}))
    assert summary.split("\n")[2:] == ['"a\\nb": integer', '"tab\\there": array (1 entries)']
    rows = summarize(ID, Content.Structured([{"x\ny": 1}]))
    assert rows.split("\n")[2] == '"x\\ny": integer'


def test_long_keys_and_huge_entries_are_shortened() -> None:
    value = {"k" * 5_000: "v", "x": 1}
    summary = summarize(ID, Content.Structured(value))
    within(summary)
    assert summary.split("\n")[2].endswith("…")
    rows = summarize(ID, Content.Structured([{"text": "t" * 100_000}] * 5))
    within(rows)


def test_top_level_scalars() -> None:
    assert summarize(ID, Content.Structured(42)) == f"{TAG} json_integer\n── value ──\n42"
    assert summarize(ID, Content.Structured(None)) == f"{TAG} json_null\n── value ──\nnull"
    long = summarize(ID, Content.Structured("é" * 5_000))
    within(long)
    assert long.startswith(f'{TAG} json_string | 5000 chars\n── value ──\n"éé')
    assert long.endswith("…")
    # A top-level scalar in a string result is not an array or object: it is stored as text.
    assert summary_of(json.dumps("x" * 900)).startswith(f"{TAG} text | 1 lines")


def test_smaller_and_larger_caps() -> None:
    text = "\n".join(["w" * 300] * 30)
    for cap in (100, 150, 400, 2_000):
        summary = summarize(ID, Content.Text(text), OutputPolicy(summary_max_bytes=cap))
        within(summary, cap)
        assert summary.startswith(f"{TAG} text | 30 lines")
    wide = OutputPolicy(head_lines=2, tail_lines=1, array_head=4)
    assert summarize(ID, Content.Text("1\n2\n3\n4\n5"), wide).endswith("1\n2\n── tail ──\n5")
    assert summarize(ID, Content.Structured(list(range(9))), wide).endswith("0\n1\n2\n3")


# -- properties --------------------------------------------------------------------------------

texts = st.text(st.characters(exclude_categories=()), max_size=3_000)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=300),
    lambda children: (
        st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=40), children, max_size=8)
    ),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(text=texts, cap=st.integers(100, 600))
def test_text_summaries_fit_and_show_prefixes(text: str, cap: int) -> None:
    summary = summarize(ID, Content.Text(text), OutputPolicy(summary_max_bytes=cap))
    within(summary, cap)
    header = summary.split("\n", 1)[0]
    lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
    assert header == f"{TAG} text | {lines} lines"
    clean = text.encode("utf-8", "replace").decode("utf-8")
    for line in summary.split("\n")[1:]:
        if line.startswith("── "):
            continue
        assert line.removesuffix("…") in clean


@settings(max_examples=200, deadline=None)
@given(value=json_values, cap=st.integers(100, 600))
def test_json_summaries_fit(value: Any, cap: int) -> None:
    policy = OutputPolicy(summary_max_bytes=cap)
    summary = summarize(ID, Content.Structured(value), policy)
    within(summary, cap)
    assert summary.startswith(f"{TAG} json_") or summary.startswith(f"{TAG} text")
    if isinstance(value, list | dict):
        assert summary == summary_of(json.dumps(value), policy)
