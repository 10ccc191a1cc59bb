"""`llm-worker chat` driven through a pseudo-terminal, as a user types it.

The child talks to a `ScriptedModelServer` (OpenAI Chat Completions wire) running on a loop
in a background thread; what the child sent is checked in the server's recorded requests.
"""

from __future__ import annotations

from typing import Any

from llm_worker.errors import InvalidRequestError
from llm_worker.testing import Chunking, ScriptedModelServer, ScriptedResponse

SLOW_ANSWER = "Counting slowly: " + " ".join(f"n{i}" for i in range(400))


def _messages(request: Any) -> list[tuple[str, str]]:
    """(role, text) of each message of an OpenAI Chat request body."""
    return [(m["role"], m.get("content") or "") for m in request.json()["messages"]]


def test_chat_streams_keeps_history_and_survives_ctrl_c(
    serve: Any, pty_child: Any, offline_env: dict[str, str]
) -> None:
    answers = [
        ScriptedResponse.text("Hello! I am the scripted model."),
        ScriptedResponse.text("Your first message was a greeting."),
        ScriptedResponse.text(SLOW_ANSWER, chunk_size=4),
        ScriptedResponse.text("Still here after the cancel."),
    ]
    # Small writes, so that the answers stream in many pieces; the delay is set per turn.
    server = ScriptedModelServer("openai_chat", answers, chunking=Chunking.random(max_size=48))
    with serve(server):
        child = pty_child(
            [
                "-m",
                "llm_worker.cli",
                "chat",
                "--model",
                "openai:m",
                "--base-url",
                f"{server.base_url}/v1",
                "--api-key",
                "k",
                "--system",
                "Be brief.",
            ],
            offline_env,
        )
        child.expect("llm-worker chat")
        child.expect("you> ")
        child.send("hello there\r")
        child.expect("Hello! I am the scripted model.")
        child.expect("usage: 1 request")
        child.expect("you> ")

        child.send("what did I say first?\r")
        child.expect("Your first message was a greeting.")
        child.expect("you> ")
        # The second request carried the whole conversation, system prompt first.
        assert _messages(server.requests[1]) == [
            ("system", "Be brief."),
            ("user", "hello there"),
            ("assistant", "Hello! I am the scripted model."),
            ("user", "what did I say first?"),
        ]

        server.chunk_delay = 0.02  # about 15 s for the whole answer: it must be cut short
        child.send("count to 400\r")
        child.expect("Counting slowly: n0")
        child.send("\x03")  # Ctrl-C, turned into SIGINT by the terminal
        child.expect("turn cancelled")
        child.expect("you> ")
        server.chunk_delay = 0.0

        child.send("are you still there?\r")
        child.expect("Still here after the cancel.")
        child.expect("you> ")
        sent = _messages(server.requests[3])
        first_two = [
            *_messages(server.requests[1]),
            ("assistant", "Your first message was a greeting."),
        ]
        assert sent[:5] == first_two
        assert ("user", "count to 400") in sent
        assert sent[-1] == ("user", "are you still there?")
        assert not any(SLOW_ANSWER in text for _, text in sent)  # the cut answer is not whole

        child.send("\x04")  # Ctrl-D at an empty prompt ends the session
        assert child.wait() == 0
        assert len(server.requests) == 4


def test_a_failed_turn_is_reported_and_left_out_of_the_history(
    serve: Any, pty_child: Any, offline_env: dict[str, str]
) -> None:
    broken = ScriptedResponse.text(
        "This answer breaks off", fail_with=InvalidRequestError("context too long")
    )
    server = ScriptedModelServer("openai_chat", [broken, ScriptedResponse.text("Fine now.")])
    with serve(server):
        args = ["--model", "openai:m", "--base-url", f"{server.base_url}/v1", "--api-key", "k"]
        child = pty_child(["-m", "llm_worker.cli", "chat", *args], offline_env)
        child.expect("you> ")
        child.send("first try\r")
        failed = child.expect("you> ")
        child.send("second try\r")
        child.expect("Fine now.")
        child.expect("you> ")
        child.send("\x04")
        assert child.wait() == 0
    assert "error: openai_chat: context too long" in failed
    assert "this turn was not kept" in failed
    assert "Traceback" not in failed
    assert _messages(server.requests[1]) == [("user", "second try")]
