// The `ai` package (6.x) consuming llm-worker's UI message stream, as a browser would.
// argv: <url> <plan JSON>. The plan: [{send: "text", dropAfter?: "chunk type"} |
// {approve: true|false, reason?, dropAfter?} | {clientTool: "output", tool?, auto?} | {resume: true} |
// {resumeChat: "chat id"}].
// `dropAfter` breaks the connection as a network failure would, once a chunk of that type
// has arrived; `resume` then calls the chat's resumeStream() (GET {api}/{id}/stream);
// `resumeChat` calls resumeStream() on a fresh chat of that id and records what it shows.
// "chat" mode drives AbstractChat over DefaultChatTransport (each chunk validated by
// uiMessageChunkSchema); after each step the raw chunks of the same answer are also checked
// one by one against uiMessageChunkSchema, and readUIMessageStream assembles them.
// A `clientTool` step with `auto` sends nothing itself: the chat's sendAutomaticallyWhen
// (lastAssistantMessageIsCompleteWithToolCalls, as apps set it) must send the outputs.
// Prints {messages, status, errors, chunks, requests, assembled, drops, others} as JSON.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
  uiMessageChunkSchema,
} from "ai";

const [url, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const errors = [];
const chunks = [];
const requests = [];
const assembled = [];
const drops = [];
const others = [];
let dropAfter;

class State {
  constructor() { this.status = "ready"; this.error = undefined; this.messages = []; }
  pushMessage(m) { this.messages = this.messages.concat([m]); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = this.messages.map((x, j) => (j === i ? m : x)); }
  snapshot(thing) { return structuredClone(thing); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

// Tee every response: the chat reads one copy, the other is validated chunk by chunk and
// assembled by readUIMessageStream on its own.
const schema = uiMessageChunkSchema();
async function recordingFetch(input, init) {
  const body = init.body === undefined ? undefined : JSON.parse(init.body);
  if (body) requests.push(body);
  if (body && dropAfter) return droppingFetch(input, init, dropAfter);
  const response = await fetch(input, init);
  if (!response.body) return response;
  const [a, b] = response.body.tee();
  // An answer that continues an assistant message (after an approval) is read on top of it.
  const last = body && body.messages[body.messages.length - 1];
  const base = last && last.role === "assistant" ? structuredClone(last) : undefined;
  validateAndAssemble(b, response.headers.get("x-vercel-ai-ui-message-stream"), base);
  return new Response(a, { status: response.status, headers: response.headers });
}

// The response as far as the first chunk of type `marker`, then a network failure: the
// connection is closed and the reader gets the TypeError fetch gives when a network drops.
async function droppingFetch(input, init, marker) {
  dropAfter = undefined;
  const cut = new AbortController();
  const response = await fetch(input, { ...init, signal: AbortSignal.any([init.signal, cut.signal]) });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  const body = new ReadableStream({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) { controller.close(); return; }
      controller.enqueue(value);
      seen += decoder.decode(value, { stream: true });
      if (seen.includes(`"type":"${marker}"`)) {
        cut.abort();
        controller.error(new TypeError("network error"));
      }
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

let pending = Promise.resolve();
function validateAndAssemble(body, header, base) {
  pending = pending.then(async () => {
    if (header !== "v1") errors.push(`header x-vercel-ai-ui-message-stream is ${header}`);
    const text = await new Response(body).text();
    const parsed = [];
    for (const event of text.split("\n\n")) {
      // An event of a resumable run has its `id:` line first.
      const line = event.split("\n").find((l) => l.startsWith("data: "));
      if (line === undefined) continue;
      const data = line.slice(6);
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      const check = await schema.validate(chunk);
      if (!check.success) errors.push(`invalid chunk ${data}: ${check.error}`);
      chunks.push(chunk);
      parsed.push(chunk);
    }
    if (!text.trimEnd().endsWith("data: [DONE]")) errors.push("stream does not end with [DONE]");
    const stream = new ReadableStream({
      start(c) { for (const p of parsed) c.enqueue(p); c.close(); },
    });
    let last;
    for await (const m of readUIMessageStream({ message: base, stream, onError: (e) => errors.push(`read: ${e}`) })) last = m;
    assembled.push(last);
  });
}

let autoSend = false;
let onFinished;
const chat = new Chat({
  id: "chat-1",
  transport: new DefaultChatTransport({ api: url, fetch: recordingFetch }),
  sendAutomaticallyWhen: (o) => autoSend && lastAssistantMessageIsCompleteWithToolCalls(o),
  onFinish: () => { const f = onFinished; onFinished = undefined; if (f) f(); },
  onError: (e) => (e.message === "network error" ? drops : errors).push(`chat: ${e.message}`),
});

for (const step of plan) {
  if (step.send !== undefined) {
    dropAfter = step.dropAfter;
    await chat.sendMessage({ text: step.send });
  } else if (step.resume !== undefined) {
    await chat.resumeStream();
  } else if (step.resumeChat !== undefined) {
    const other = new Chat({
      id: step.resumeChat,
      transport: new DefaultChatTransport({ api: url, fetch: recordingFetch }),
      onError: (e) => errors.push(`other chat: ${e.message}`),
    });
    await other.resumeStream();
    others.push({ status: other.status, messages: other.messages });
  } else if (step.clientTool !== undefined) {
    // The browser runs the front-end tool calls the answer left waiting (those of `tool`
    // only, when given: an app's onToolCall runs its own tools), then goes on.
    const last = chat.messages[chat.messages.length - 1];
    autoSend = Boolean(step.auto);
    const finished = new Promise((r) => { onFinished = r; });
    for (const part of last.parts) {
      if (part.state === "input-available" && (!step.tool || part.type === `tool-${step.tool}`)) {
        await chat.addToolOutput({ tool: part.type.slice(5), toolCallId: part.toolCallId, output: step.clientTool });
      }
    }
    if (step.auto) {
      let timer;
      const late = new Promise((r) => { timer = setTimeout(() => r("late"), 10000); });
      if ((await Promise.race([finished, late])) === "late") errors.push("no automatic request");
      clearTimeout(timer);
      autoSend = false;
    } else {
      onFinished = undefined;
      await chat.sendMessage();
    }
  } else {
    dropAfter = step.dropAfter;
    const last = chat.messages[chat.messages.length - 1];
    for (const part of last.parts) {
      if (part.state === "approval-requested") {
        await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approve, reason: step.reason });
      }
    }
    await chat.sendMessage();
  }
  await pending;
}
console.log(JSON.stringify({ messages: chat.messages, status: chat.status, errors, chunks, requests, assembled, drops, others }));
