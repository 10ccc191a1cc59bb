// @ag-ui/client's HttpAgent running against llm-worker's AG-UI endpoint; every event is
// validated by @ag-ui/core's EventSchema. argv: <url> <plan JSON>; the plan:
// [{send: "text", tools?: [...]} | {approve: bool, reason?} | {toolResult: "text"}].
// Prints {messages, events, errors, finished} as JSON.
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";

const [url, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const events = [];
const errors = [];
const finished = [];
const agent = new HttpAgent({ url, threadId: "thread-1" });
const subscriber = {
  onEvent({ event }) {
    events.push(event);
    const check = EventSchema.safeParse(event);
    if (!check.success) errors.push(`invalid ${event.type}: ${check.error}`);
  },
  onRunFinishedEvent({ event }) { finished.push(event); },
  onRunFailed({ error }) { errors.push(`failed: ${error}`); },
};

let n = 0;
let tools = [];
for (const step of plan) {
  n += 1;
  const params = {};
  if (step.send !== undefined) {
    agent.addMessage({ id: `user-${n}`, role: "user", content: step.send });
    tools = step.tools ?? tools;
  } else if (step.approve !== undefined) {
    params.resume = agent.pendingInterrupts.map((i) => ({
      interruptId: i.id,
      status: step.approve ? "resolved" : "cancelled",
      payload: { approved: step.approve, ...(step.reason ? { reason: step.reason } : {}) },
    }));
  } else if (step.toolResult !== undefined) {
    const last = finished[finished.length - 1];
    for (const id of last.outcome.pendingToolCallIds) {
      agent.addMessage({ id: `result-${id}`, role: "tool", toolCallId: id, content: step.toolResult });
    }
  }
  try {
    await agent.runAgent({ ...params, tools }, subscriber);
  } catch (e) {
    errors.push(`runAgent: ${e}`);
  }
}
console.log(JSON.stringify({ messages: agent.messages, events, errors, finished }));
