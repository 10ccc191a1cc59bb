"""Every example runs offline (against the embedded model server) and prints what it claims."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
API_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")

# Lines each example must print, in this order.
EXPECTED: dict[str, list[str]] = {
    "guardrails.py": [
        "input guardrail 'no_fraud' tripped: bulk refunds need a person",
        "refunds made: []",
        "· no_card_numbers passed the text so far",
        "· the held text was dropped",
        "output guardrail 'no_card_numbers' tripped: card details in the answer",
        "the reader saw: 'Your order ships tomorro'",
    ],
    "steering.py": [
        "» steer: Actually, make it Osaka.",
        "← book_hotel: Skipped: the user sent a new instruction before this call started",
        "· steer taken in: Actually, make it Osaka.",
        "← book_hotel: booked a hotel in Osaka",
        "· follow_up taken in: And where should I eat tonight?",
        "final answer: Dinner: try Kushikatsu Daruma in Dotonbori.",
        "hotels booked: ['Osaka']",
    ],
    "streaming_ui.py": [
        "(offline: a scripted model behind the anthropic wire format on 127.0.0.1)",
        "· started",
        "┌ thinking…",
        "└ thinking: 58 chars",
        "┌ text",
        "Let me check the weather in Kyoto.",
        "└ text: 34 chars in 6 pieces",
        "┌ tool get_weather",
        '└ tool get_weather({"city":"Kyoto"}) in 3 fragments',
        "· completed",
        "It is 21 °C with a clear sky in Kyoto.",
        "final answer: It is 21 °C with a clear sky in Kyoto.",
        "usage: 2 requests, 690 tokens in, 57 out",
    ],
    "approval_pause_resume.py": [
        "process 1 (pid {pid1}): running",
        "process 1: paused — send_invitation requires approval (call ",
        "process 1:   check_calendar({'day': 'Friday'}) is allowed",
        "process 1:   send_invitation({'to': 'ana@example.com', 'when': 'Friday 14:00'}) "
        "is pending",
        "process 1: state saved to pause-state.json",
        "process 2 (pid {pid2}): loading pause-state.json",
        "process 2: approved send_invitation",
        "[pid {pid2}] >>> invitation sent to ana@example.com for Friday 14:00",
        "process 2: the request carried process 1's conversation: True",
        "process 2: finished: Done: Friday 14:00 was free and Ana is invited.",
    ],
    "durable_approval.py": [
        "process 1 (pid {pid1}): starting run invite-ana",
        "process 1: paused — send_invitation requires approval (call ",
        "process 2 (pid {pid2}): approved send_invitation({'to': 'ana@example.com', "
        "'when': 'Friday 14:00'})",
        "[pid {pid1}] >>> invitation sent to ana@example.com for Friday 14:00",
        "process 1: finished after 2 requests: Done: Ana is invited for Friday 14:00.",
    ],
    "durable_temporal.py": [
        "process 1 (pid {pid1}): starting run invite-ana",
        "process 1: paused — send_invitation requires approval (call ",
        "process 2 (pid {pid2}): approved send_invitation({'to': 'ana@example.com', "
        "'when': 'Friday 14:00'})",
        "[pid {pid1}] >>> invitation sent to ana@example.com for Friday 14:00",
        "process 1: finished after 2 requests: Done: Ana is invited for Friday 14:00.",
    ],
    "structured_output.py": [
        "(offline: a scripted model behind the openai_responses wire format on 127.0.0.1)",
        "✗ answer 1 rejected: total: Input should be a valid number",
        "…   88 chars: 0 line(s) so far",  # the first partial: as soon as the JSON fits
        "…  471 chars: 8 line(s) so far",
        "finished after 2 requests",
        "invoice INV-2041 for Kyoto Tea House: 8 lines",
        "   12 x Sencha, 100 g       8.50",
        "total = 315.00",
        "asked for: json_schema Invoice",
    ],
    "json_fix_on_turn_end.py": [
        "✗ answer 1 is not a valid Forecast: temperature_c: Input should be a valid number",
        "conditions: Field required",
        "→ asking the model to fix it",
        "✓ answer 2 is a valid Forecast: Forecast(city='Kyoto', temperature_c=21.5",
        "finished after 2 requests:",
        "the fix request reached the model: True",
        "forecast.temperature_c = 21.5",
    ],
    "mask_secrets.py": [
        "after_tool_call: masked 3 secrets in read_config's result",
        "DATABASE_URL=postgres://admin:***@db.internal:5432/shop",
        "OPENAI_API_KEY=***",
        "SMTP_PASSWORD=***",
        "DEBUG=false",
        "secrets that reached the model: none",
    ],
    "large_outputs.py": [
        "search_orders: a large output, stored as blob",
        "the full output: 16681 bytes in the store",
        "the model reads this summary",
        "] json_array | 250 entries",
        "id: integer, status: string, customer: string, total: integer",
        "inspect: ",
        "── entries 0..3",
        '{"id":1002,"status":"pending","customer":"customer-2","total":12}',
        "model: There are 250 pending orders",
        "files in the blob store: ['.json']",
    ],
    "object_store_blobs.py": [
        "machine 1 stored the log; the model read a",
        "] text | 5000 lines",
        "machine 2 read with inspect:",
        "── lines 4210-4214 ──",
        "step 4212 FAILED: module_4212.c:88: undefined reference to `frobnicate'",
        "model: Step 4212 failed",
        "objects in the store: ['.idx', '.txt']",
    ],
    "sub_agents.py": [
        "[editor] starts",
        "[call_research] Found: Lamport clocks (logical time): 1978, CACM 21(7).",
        "paused: publish requires approval (call ",
        "a person approves publish({'fact': 'Lamport 1978'})",
        "[call_check] Checked and published.",
        "[editor] Both desks are done: the fact is out.",
        "finished: Both desks are done: the fact is out.",
        "published: ['Lamport 1978']",
        "usage of the tree: 2 editor requests, 4 sub-agent requests",
        "  call_research (research): 2 requests",
        "  call_check (check): 2 requests",
    ],
    "streaming_worker.py": [
        "── run starts",
        "Let me search the catalogue.",
        "→ search({'query': 'logical clocks'})",
        "← search: 3 papers on logical clocks: Lamport 1978",
        "→ save_note({'text': 'Lamport 1978; Fidge 1988; Mattern 1989'})",
        "── paused after 2 request(s)",
        "paused: save_note requires approval (call ",
        "a person approved the note",
        "── run starts",
        "← save_note: saved",
        "Saved: three papers on logical clocks.",
        "── finished after 3 request(s)",
        "final answer: Saved: three papers on logical clocks.",
        "notes saved: ['Lamport 1978; Fidge 1988; Mattern 1989']",
    ],
    "image_input.py": [
        "attached: ImagePart(<80 bytes>, 'image/png')",
        "attached: DocumentPart(<26 bytes>, 'text/plain', name='notes.txt')",
        "(offline: a scripted model behind the anthropic wire format on 127.0.0.1)",
        "model: Your picture and your screen both show a red square.",
        "request 1: TextPart, ImagePart, DocumentPart",
        "  as sent: text, image, document",
        "request 2: the screenshot's result holds 'The screen, 16x16 pixels:' and "
        "[ImagePart(<80 bytes>, 'image/png')]",
    ],
    "aiohttp_transport.py": [
        "(offline: a scripted model behind the openai_chat wire format on 127.0.0.1)",
        "transport: aiohttp",
        "50 runs done, 100 text pieces streamed in ",
        "requests through our session: 50",
        "httpx imported: False",
        "session still open after the client closed: True",
    ],
    "mcp_tools.py": [
        "tool get_current_time (read_only): Get current time in a specific timezone",
        "tool convert_time (read_only): Convert time between timezones",
        "(offline: a scripted model behind the anthropic wire format on 127.0.0.1)",
        "← get_current_time: timezone Asia/Tokyo",
        "final answer: It is ",
    ],
    "tracing.py": [
        "  chat claude-sonnet-4-5: operation.name='chat' response.finish_reasons=('tool_call',) "
        "usage.input_tokens=420 usage.output_tokens=38",
        "  execute_tool get_weather: operation.name='execute_tool' tool.call.id='call_1' "
        "tool.outcome='done'",
        "  chat claude-sonnet-4-5: operation.name='chat' response.finish_reasons=('stop',)",
        "invoke_agent weather: operation.name='invoke_agent' agent.name='weather' "
        "usage.input_tokens=900 usage.output_tokens=52 run.status='finished'",
        "answer: It is sunny and 21 °C in Kyoto.",
        "metric gen_ai.client.operation.duration: 2 values",
        "metric gen_ai.client.operation.time_to_first_chunk: 2 values",
        "metric gen_ai.client.token.usage: 4 values",
        "cost: $0.002670",  # (120 * 3 + 300 * 0.3 + 38 * 15 + 480 * 3 + 14 * 15) / 1e6
    ],
    "subscriber.py": [
        "── turn 0 starts",
        "tool call: convert({'amount': 20, 'currency': 'JPY'})",
        "a text block streamed in",
        "text: '20 euros are 3240 yen.'",
        "── turn 0 ends (2 requests,",
        "── turn 1 starts",
        "text: 'And 20 euros are 21.60 dollars.'",
        "── turn 1 ends (3 requests,",
        "history: 6 messages",
    ],
}


def run_example(name: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS and k != "LLM_WORKER_MODEL"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--offline", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    return done.stdout


def assert_in_order(out: str, lines: list[str]) -> None:
    at = 0
    for line in lines:
        found = out.find(line, at)
        assert found >= 0, f"{line!r} missing after position {at} in:\n{out}"
        at = found + len(line)


def test_every_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("[!_]*.py")} == set(EXPECTED)


TWO_PROCESSES = {"approval_pause_resume.py", "durable_approval.py", "durable_temporal.py"}


@pytest.mark.parametrize("name", sorted(set(EXPECTED) - TWO_PROCESSES))
def test_example(name: str) -> None:
    assert_in_order(run_example(name), EXPECTED[name])


@pytest.mark.parametrize("name", sorted(TWO_PROCESSES))
def test_pause_and_resume_happen_in_two_processes(name: str) -> None:
    out = run_example(name)
    pids = re.findall(r"process (\d) \(pid (\d+)\)", out)
    assert [n for n, _ in pids] == ["1", "2"]
    pid1, pid2 = (p for _, p in pids)
    assert pid1 != pid2
    expected = [line.replace("{pid1}", pid1).replace("{pid2}", pid2) for line in EXPECTED[name]]
    assert_in_order(out, expected)
    assert out.count(">>> invitation sent") == 1  # approved once, run once


def test_an_example_recorded_into_a_cassette_replays_it_with_the_model_gone(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "kyoto.jsonl"
    recorded = run_example("streaming_ui.py", "--cassette", str(cassette))
    assert f"(recorded into {cassette})" in recorded
    replayed = run_example("streaming_ui.py", "--cassette", str(cassette))
    assert f"(replay: anthropic scripted-model from {cassette})" in replayed
    assert "(offline" not in replayed  # no scripted model: the cassette answered
    assert_in_order(replayed, EXPECTED["streaming_ui.py"][1:])


def test_a_denied_call_never_runs_and_the_model_is_told() -> None:
    out = run_example("approval_pause_resume.py", "--deny")
    assert_in_order(
        out,
        [
            "process 1: paused",
            "process 2: denied send_invitation",
            "process 2: finished: Friday 14:00 is free, but I did not invite Ana: you said no.",
        ],
    )
    assert ">>> invitation sent" not in out


def test_a_refused_note_is_never_saved_and_the_stream_says_so() -> None:
    out = run_example("streaming_worker.py", "--deny")
    assert_in_order(
        out,
        [
            "── paused after 2 request(s)",
            "a person refused the note",
            "← save_note: Denied: the user said no",
            "final answer: Understood: nothing was saved.",
            "notes saved: []",
        ],
    )
