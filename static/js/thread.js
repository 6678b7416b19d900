/*
 * The conversation: messages, the reply being streamed, tool calls, the working state,
 * failures with Retry, and the actions on a message (copy; regenerate the last reply;
 * edit and resend the last message of yours).
 *
 * Content is never parsed here: user messages and tool payloads go in through
 * textContent, a stored reply as the server's sanitized HTML (render.js), a reply still
 * streaming as text. Consecutive assistant output of one turn (text, tool calls, their
 * results, the final reply) shares one row under the agent's avatar; each tool call is a
 * compact <details> whose summary says what it did in the server's sentence and which
 * expands to the call and its result (JSON).
 *
 * Order is kept by construction: the user's message (even while it is on its way) always
 * comes before the reply that streams for it, whatever arrives first.
 *
 * Here: the thread's state and what it does with a message. Beside it: thread-rows.js (the
 * rows and their order), thread-stream.js (deltas into the reply), thread-tools.js (tool
 * calls) and thread-actions.js (copy, regenerate, edit).
 */
import { el } from "./util.js";
import { showRendered } from "./render.js";
import { toolChip, showResult, resultAlone } from "./thread-tools.js";
import { keepScrolled, add, openGroup, userNode, failureCard, emptyState, headButton, workingNode } from "./thread-rows.js";
import { addDelta, dropStream, takeStream, endStream } from "./thread-stream.js";
import { refreshActions } from "./thread-actions.js";
import { memoryLine } from "./thread-memory.js";
import { versionPager } from "./thread-versions.js";

// The user's own /remember, /forget, /note: its sentence is said once, by the memory line.
const isCommand = (message) => Boolean((message.memory_trace || {}).command && (message.memory_trace.changed || []).length);
const commandCall = (call) => String(call.id || "").startsWith("command-");

function fillPart(t, part, mdNode, message) {
  const pager = versionPager(message, (version) => showRendered(mdNode, version.content_html, version.content));
  if (message.content && !isCommand(message)) showRendered(mdNode, message.content_html, message.content);
  else if (pager) mdNode.replaceChildren();
  else mdNode.remove();
  if (pager) part.append(pager);
  const all = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  all.filter(commandCall).forEach((call) => toolChip(call, t.chips)); // its result finds it, unseen
  const calls = all.filter((call) => !commandCall(call));
  if (calls.length) part.append(el("div", { class: "tools" }, calls.map((call) => toolChip(call, t.chips))));
  if (message.stopped) part.append(el("p", { class: "stopped-note", text: message.content ? "Stopped" : "Stopped before the reply began" }));
  const line = memoryLine(t, message);
  if (line) part.append(line);
  part.dataset.messageId = String(message.id);
}

function addAssistant(t, message) {
  let part;
  let mdNode;
  if (t.stream) {
    ({ part, mdNode } = takeStream(t));
  } else {
    mdNode = el("div", { class: "md" });
    part = el("div", { class: "part" }, mdNode);
    openGroup(t).body.append(part);
  }
  fillPart(t, part, mdNode, message);
  return part;
}

function addToolResult(t, message) {
  const chip = t.chips.get(message.tool_call_id);
  if (chip) {
    showResult(chip, message);
    return null;
  }
  // Its call is in another topic (a fork moved it) or on an earlier page: the result alone.
  const part = el("div", { class: "part" }, el("div", { class: "tools" }, resultAlone(message, t.chips)));
  openGroup(t).body.append(part);
  return part;
}

function addUser(t, message) {
  let node;
  if (t.pending && t.pending.content === message.content) {
    node = t.pending.node;
    node.classList.remove("is-pending");
    t.pending = null;
  } else {
    node = userNode(t, message.content);
  }
  const bubble = node.querySelector(".bubble");
  const pager = versionPager(message, (version) => (bubble.textContent = version.content));
  if (pager) node.append(pager);
  // Before a reply already streaming for it (a fork's events may overtake it).
  add(t, node, { beforeStream: true });
  return node;
}

function place(t, message, { live = true } = {}) {
  if (message.id && t.rendered.has(message.id)) return;
  let node = null;
  if (message.role === "user") {
    node = addUser(t, message);
  } else if (message.role === "assistant") {
    node = addAssistant(t, message);
  } else if (message.role === "tool") {
    node = addToolResult(t, message);
  } else if (message.role === "error") {
    if (live) return; // a live failure arrives as turn.error, with its Retry
    node = failureCard(t, message.content, false);
    node.classList.add("past-failure");
    add(t, node);
  }
  if (message.id) {
    if (node) t.rendered.set(message.id, node);
    t.messages.push(message);
  }
}

function clear(t, readOnly) {
  t.readOnly = readOnly;
  t.root.replaceChildren();
  t.rendered.clear();
  t.chips.clear();
  t.messages = [];
  t.group = null;
  t.failure = null;
}

/** Show a topic's messages (the options are those of the thread's render, below). */
function render(t, list, { previous = null, readOnly = false, earlier = false, keepScroll = false, keepStream = true } = {}) {
  const { root, scroller } = t;
  if (!keepStream || readOnly) dropStream(t);
  const live = t.stream ? t.stream.group.node : null;
  const fromBottom = scroller.scrollHeight - scroller.scrollTop;
  clear(t, readOnly);
  const head = headButton(t, earlier, previous);
  if (head) root.append(head);
  // A topic that ends in a failure offers Retry, as it did when the turn failed.
  const last = list[list.length - 1];
  const retryable = !readOnly && last !== undefined && last.role === "error";
  (retryable ? list.slice(0, -1) : list).forEach((message) => place(t, message, { live: false }));
  if (t.pending && !readOnly) root.append(t.pending.node);
  else t.pending = null;
  if (live) {
    root.append(live);
    t.group = t.stream.group;
  }
  if (retryable) {
    t.failure = failureCard(t, last.content, true);
    root.append(t.failure);
  }
  if (!list.length && !live && !t.pending) root.append(emptyState(t.agentName));
  if (t.working && !readOnly) root.append(t.working);
  refreshActions(t);
  scroller.scrollTop = keepScroll ? scroller.scrollHeight - fromBottom : scroller.scrollHeight;
  if (keepScroll) (root.querySelector(".load-earlier") || root).focus({ preventScroll: true });
}

/** Take messages out (a reply replaced by a regenerated one). */
function remove(t, ids) {
  for (const id of ids) {
    const node = t.rendered.get(id);
    t.rendered.delete(id);
    t.messages = t.messages.filter((message) => message.id !== id);
    if (!node) continue;
    const row = node.closest(".msg");
    node.remove();
    if (row && row.classList.contains("msg-assistant") && !row.querySelector(".part")) {
      row.remove();
      if (t.group && t.group.node === row) t.group = null;
    }
  }
  refreshActions(t);
}

/** true: the agent is working (dots until text streams); a string: what it is doing. */
function setWorking(t, state) {
  const label = typeof state === "string" ? state : t.agentName + " is thinking…";
  const wasBusy = t.busy;
  t.busy = Boolean(state);
  if (wasBusy !== t.busy) refreshActions(t);
  const show = Boolean(state) && !t.stream;
  if (!show) {
    t.working?.remove();
    t.working = null;
    return;
  }
  if (!t.working) {
    t.working = workingNode();
    keepScrolled(t, () => t.root.append(t.working));
  }
  t.working.querySelector(".label").textContent = label;
}

function addPending(t, content) {
  const node = userNode(t, content);
  node.classList.add("is-pending");
  t.pending = { content, node };
  keepScrolled(t, () => add(t, node, { beforeStream: true }), true);
}

/** The message never reached the server: take it back (for the composer). */
function takeBackPending(t) {
  if (!t.pending) return null;
  t.pending.node.remove();
  const { content } = t.pending;
  t.pending = null;
  return content;
}

function showFailure(t, text, retryable) {
  t.failure?.remove();
  t.failure = failureCard(t, text, retryable);
  keepScrolled(t, () => t.root.append(t.failure), true);
}

function threadApi(t) {
  const api = {
    /**
     * Show a topic's messages. `previous` is {id, title} of the topic it continues, if any;
     * `earlier`: there are older messages (a "Load earlier messages" button comes first);
     * `keepScroll`: messages were added above, so keep the reader where they were;
     * `keepStream`: a reply still streaming stays (its turn is not over in what was read).
     */
    render: (list, options) => render(t, list, options),
    append(message) {
      keepScrolled(t, () => place(t, message));
      refreshActions(t);
    },
    has: (id) => t.rendered.has(id),
    remove: (ids) => remove(t, ids),
    /** The stored messages shown, in order. */
    messages: () => t.messages,
    delta(turnId, text, html) {
      if (addDelta(t, turnId, text, html)) setWorking(t, true);
    },
    /** The text streamed so far of the reply in progress ("" when none). */
    streamedText: () => (t.stream ? t.stream.text : ""),
    endStream: () => endStream(t),
    setWorking: (state) => setWorking(t, state),
    showFailure: (text, retryable) => showFailure(t, text, retryable),
    clearFailure() {
      t.failure?.remove();
      t.failure = null;
    },
    addPending: (content) => addPending(t, content),
    takeBackPending: () => takeBackPending(t),
    scrollToEnd() {
      t.scroller.scrollTop = t.scroller.scrollHeight;
    },
  };
  return api;
}

export function createThread({ root, scroller, agentName, sessionId, onRetry, onOpenTopic, onOpenPanel, onUndoChange, onLoadEarlier, onRegenerate, onEdit }) {
  const t = {
    root,
    scroller,
    agentName,
    sessionId,
    onOpenPanel,
    onUndoChange,
    onRetry,
    onOpenTopic,
    onLoadEarlier,
    onRegenerate,
    onEdit,
    initial: (agentName || "?").trim().charAt(0).toUpperCase(),
    rendered: new Map(), // message id -> node
    chips: new Map(), // tool call id -> chip parts
    group: null, // the open assistant row { node, body }
    stream: null, // the reply streaming (thread-stream.js)
    working: null,
    failure: null,
    pending: null, // the user's message on its way: { content, node }
    messages: [], // what is shown, in order (for the actions on the last ones)
    readOnly: false,
    busy: false, // a turn is running: no regenerate or edit meanwhile
  };
  return threadApi(t);
}
