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
 */
import { el, icon, copyText, announce } from "./util.js";
import { showRendered, showStreaming } from "./render.js";

const NEAR_BOTTOM_PX = 140;
// The server sends reply text in batches (at most one event per ~100 ms): each batch is
// revealed over about this many animation frames, so the text flows as it did token by
// token while the next batch is on its way.
const REVEAL_FRAMES = 6;

function parseJson(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch (err) {
    return undefined;
  }
}

function pretty(value) {
  const parsed = parseJson(value);
  if (parsed === undefined) return String(value == null ? "" : value);
  return typeof parsed === "string" ? parsed : JSON.stringify(parsed, null, 2);
}

const asObject = (value) => {
  const parsed = parseJson(value);
  return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
};

export function createThread({ root, scroller, agentName, onRetry, onOpenTopic, onLoadEarlier, onRegenerate, onEdit }) {
  const rendered = new Map(); // message id -> node
  const chips = new Map(); // tool call id -> chip parts
  let group = null; // the open assistant row { node, body }
  let stream = null; // { turnId, part, mdNode, text, shown, frame, group }
  let working = null;
  let failure = null;
  let pending = null; // the user's message on its way: { content, node }
  let messages = []; // what is shown, in order (for the actions on the last ones)
  let readOnly = false;
  let busy = false; // a turn is running: no regenerate or edit meanwhile
  const initial = (agentName || "?").trim().charAt(0).toUpperCase();

  const nearBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_BOTTOM_PX;

  function keepScrolled(change, force) {
    const stick = force || nearBottom();
    change();
    if (stick) scroller.scrollTop = scroller.scrollHeight;
  }

  /** Append before the live reply, the working indicator and the failure card, which stay last. */
  function add(node, { beforeStream = false } = {}) {
    root.querySelector(".empty-thread")?.remove();
    const live = beforeStream && stream && stream.group.node.parentNode === root ? stream.group.node : null;
    const anchor = live || [working, failure].find((n) => n && n.parentNode === root) || null;
    root.insertBefore(node, anchor);
  }

  function openGroup() {
    if (group && group.node.parentNode === root) return group;
    const body = el("div", { class: "body" }, el("span", { class: "visually-hidden", text: agentName + " said:" }));
    const node = el("div", { class: "msg msg-assistant" }, el("div", { class: "avatar", "aria-hidden": "true", text: initial }), body);
    add(node);
    group = { node, body };
    return group;
  }

  function userNode(content) {
    group = null;
    const bubble = el("div", { class: "bubble", text: content });
    const node = el("div", { class: "msg msg-user" }, el("span", { class: "visually-hidden", text: "You said:" }), bubble);
    return node;
  }

  /** A tool call: what it is doing; the call and its result (JSON) behind a disclosure. */
  function toolChip(call) {
    const fn = call.function || {};
    const name = fn.name || call.name || "tool";
    const args = fn.arguments !== undefined ? fn.arguments : call.arguments;
    const sentence = el("span", { class: "tool-brief", text: "Using " + name + "…" });
    const status = el("span", { class: "tool-status", text: "running" });
    const result = el("pre");
    const resultBox = el("div", { hidden: true }, el("h4", { text: "Result" }), result);
    const node = el(
      "details",
      { class: "tool" },
      el("summary", {}, icon("chevron-right", "chev"), sentence, status),
      el("div", { class: "tool-detail" }, el("h4", { text: "Call: " + name }), el("pre", { text: pretty(args || "{}") }), resultBox)
    );
    if (call.id) chips.set(call.id, { name, args, sentence, status, result, resultBox });
    return node;
  }

  function showResult(chip, message) {
    const content = message.content;
    chip.sentence.textContent = message.tool_sentence;
    const failed = "error" in asObject(content);
    chip.status.textContent = failed ? "failed" : "done";
    chip.status.classList.add(failed ? "failed" : "done");
    chip.result.textContent = pretty(content);
    chip.resultBox.hidden = false;
  }

  function fillPart(part, mdNode, message) {
    if (message.content) showRendered(mdNode, message.content_html, message.content);
    else mdNode.remove();
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    if (calls.length) part.append(el("div", { class: "tools" }, calls.map(toolChip)));
    if (message.stopped) part.append(el("p", { class: "stopped-note", text: message.content ? "Stopped" : "Stopped before the reply began" }));
    part.dataset.messageId = String(message.id);
  }

  function addAssistant(message) {
    let part;
    let mdNode;
    if (stream) {
      ({ part, mdNode } = stream);
      cancelAnimationFrame(stream.frame);
      part.classList.remove("is-streaming");
      stream.group.node.removeAttribute("aria-busy");
      group = stream.group;
      stream = null;
    } else {
      mdNode = el("div", { class: "md" });
      part = el("div", { class: "part" }, mdNode);
      openGroup().body.append(part);
    }
    fillPart(part, mdNode, message);
    return part;
  }

  function addToolResult(message) {
    const chip = chips.get(message.tool_call_id);
    if (chip) {
      showResult(chip, message);
      return null;
    }
    // Its call is in another topic (a fork moved it) or on an earlier page: the result alone.
    const node = toolChip({ id: "", name: message.tool_name || "tool", arguments: "" });
    const alone = { name: message.tool_name || "tool", args: "", sentence: node.querySelector(".tool-brief"), status: node.querySelector(".tool-status"), result: el("pre"), resultBox: el("div") };
    node.querySelector(".tool-detail").replaceChildren(el("h4", { text: "Result" }), alone.result);
    showResult(alone, message);
    const part = el("div", { class: "part" }, el("div", { class: "tools" }, node));
    openGroup().body.append(part);
    return part;
  }

  function failureCard(text, retryable) {
    group = null;
    const card = el("div", { class: "failure", role: "alert" }, el("span", { class: "why", text: "The reply failed: " + text }));
    if (retryable) card.append(el("button", { type: "button", class: "btn btn-small", onclick: () => onRetry() }, "Retry"));
    return card;
  }

  function place(message, { live = true } = {}) {
    if (message.id && rendered.has(message.id)) return;
    let node = null;
    if (message.role === "user") {
      if (pending && pending.content === message.content) {
        node = pending.node;
        node.classList.remove("is-pending");
        pending = null;
      } else {
        node = userNode(message.content);
      }
      // Before a reply already streaming for it (a fork's events may overtake it).
      add(node, { beforeStream: true });
    } else if (message.role === "assistant") {
      node = addAssistant(message);
    } else if (message.role === "tool") {
      node = addToolResult(message);
    } else if (message.role === "error") {
      if (live) return; // a live failure arrives as turn.error, with its Retry
      node = failureCard(message.content, false);
      node.classList.add("past-failure");
      add(node);
    }
    if (message.id) {
      if (node) rendered.set(message.id, node);
      messages.push(message);
    }
  }

  // --- the actions on a message ------------------------------------------------------------

  /** The final reply shown last and the user message it answers, when they are the topic's last. */
  function lastExchange() {
    const last = messages[messages.length - 1];
    const lastUser = [...messages].reverse().find((message) => message.role === "user") || null;
    const reply = last && last.role === "assistant" && !(last.tool_calls || []).length ? last : null;
    return { lastUser, reply };
  }

  function actionButton(label, name, onclick) {
    return el("button", { type: "button", class: "btn btn-quiet btn-small msg-action", "aria-label": label, title: label, onclick }, icon(name), el("span", { class: "label", text: label.split(" ")[0] }));
  }

  function flash(button, text) {
    const label = button.querySelector(".label");
    const before = label.textContent;
    label.textContent = text;
    setTimeout(() => (label.textContent = before), 1500);
  }

  /** Copy on every message; Regenerate on the last reply; Edit on your last message. */
  function refreshActions() {
    for (const bar of root.querySelectorAll(".msg-actions")) bar.remove();
    const { lastUser, reply } = lastExchange();
    for (const message of messages) {
      const node = rendered.get(message.id);
      if (!node || !node.isConnected || !(message.role === "user" || (message.role === "assistant" && message.content))) continue;
      const copy = actionButton(message.role === "user" ? "Copy your message" : "Copy the reply", "copy", async () => {
        const ok = await copyText(message.content);
        flash(copy, ok ? "Copied" : "Copy failed");
        announce(ok ? "Copied." : "Could not copy.");
      });
      const bar = el("div", { class: "msg-actions" }, copy);
      if (!readOnly && !busy && reply && message === reply && onRegenerate) {
        bar.append(actionButton("Regenerate the reply", "retry", () => onRegenerate(reply)));
      }
      if (!readOnly && !busy && lastUser && message === lastUser && onEdit) {
        bar.append(actionButton("Edit and resend", "edit", () => startEdit(message, node)));
      }
      node.append(bar);
    }
  }

  function startEdit(message, node) {
    const bubble = node.querySelector(".bubble");
    const input = el("textarea", { class: "edit-input", "aria-label": "Edit your message", rows: "3" });
    input.value = message.content;
    const cancel = () => {
      form.replaceWith(bubble);
      refreshActions();
    };
    const form = el(
      "form",
      { class: "msg-edit", onsubmit: (event) => { event.preventDefault(); const text = input.value.trim(); if (text && text !== message.content) onEdit(message, text); else cancel(); } },
      input,
      el("div", { class: "form-row" }, el("button", { type: "button", class: "btn btn-small", onclick: cancel }, "Cancel"), el("button", { type: "submit", class: "btn btn-primary btn-small" }, "Send"))
    );
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        cancel();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    node.querySelector(".msg-actions")?.remove();
    bubble.replaceWith(form);
    input.focus();
  }

  function emptyState() {
    return el(
      "div",
      { class: "empty-thread" },
      el("h2", { text: "What's on your mind?" }),
      el("p", { text: agentName + " keeps durable facts and a notes page per topic, and remembers the topics you promote with the brain icon." }),
      el("p", {}, "Try ", el("code", { text: "/remember favourite colour = teal" }), " or just start talking.")
    );
  }

  /** One animation frame of the stream: reveal a share of what has arrived. */
  function renderStream() {
    if (!stream) return;
    stream.frame = 0;
    const { text } = stream;
    let shown = Math.min(text.length, stream.shown + Math.ceil((text.length - stream.shown) / REVEAL_FRAMES));
    const code = text.charCodeAt(shown - 1);
    if (code >= 0xd800 && code <= 0xdbff) shown += 1; // never split a surrogate pair
    stream.shown = shown;
    keepScrolled(() => showStreaming(stream.mdNode, text.slice(0, shown)));
    if (shown < text.length) stream.frame = requestAnimationFrame(renderStream);
  }

  function dropStream() {
    if (!stream) return;
    cancelAnimationFrame(stream.frame);
    stream.part.remove();
    if (!stream.group.body.querySelector(".part")) stream.group.node.remove();
    stream = null;
  }

  const api = {
    /**
     * Show a topic's messages. `previous` is {id, title} of the topic it continues, if any;
     * `earlier`: there are older messages (a "Load earlier messages" button comes first);
     * `keepScroll`: messages were added above, so keep the reader where they were;
     * `keepStream`: a reply still streaming stays (its turn is not over in what was read).
     */
    render(list, { previous = null, readOnly: ro = false, earlier = false, keepScroll = false, keepStream = true } = {}) {
      if (!keepStream || ro) dropStream();
      const live = stream ? stream.group.node : null;
      const fromBottom = scroller.scrollHeight - scroller.scrollTop;
      readOnly = ro;
      root.replaceChildren();
      rendered.clear();
      chips.clear();
      messages = [];
      group = null;
      failure = null;
      if (earlier) {
        const more = el("button", { type: "button", class: "previous-link load-earlier", onclick: () => {
          more.disabled = true;
          more.textContent = "Loading…";
          onLoadEarlier();
        } }, "Load earlier messages");
        root.append(more);
      } else if (previous) {
        root.append(el("button", { type: "button", class: "previous-link", onclick: () => onOpenTopic(previous.id) }, "Continued from “" + previous.title + "”"));
      }
      // A topic that ends in a failure offers Retry, as it did when the turn failed.
      const last = list[list.length - 1];
      const retryable = !readOnly && last !== undefined && last.role === "error";
      (retryable ? list.slice(0, -1) : list).forEach((message) => place(message, { live: false }));
      if (pending && !readOnly) root.append(pending.node);
      else pending = null;
      if (live) {
        root.append(live);
        group = stream.group;
      }
      if (retryable) {
        failure = failureCard(last.content, true);
        root.append(failure);
      }
      if (!list.length && !live && !pending) root.append(emptyState());
      if (working && !readOnly) root.append(working);
      refreshActions();
      scroller.scrollTop = keepScroll ? scroller.scrollHeight - fromBottom : scroller.scrollHeight;
      if (keepScroll) (root.querySelector(".load-earlier") || root).focus({ preventScroll: true });
    },
    append(message) {
      keepScrolled(() => place(message));
      refreshActions();
    },
    has: (id) => rendered.has(id),
    /** Take messages out (a reply replaced by a regenerated one). */
    remove(ids) {
      for (const id of ids) {
        const node = rendered.get(id);
        rendered.delete(id);
        messages = messages.filter((message) => message.id !== id);
        if (!node) continue;
        const row = node.closest(".msg");
        node.remove();
        if (row && row.classList.contains("msg-assistant") && !row.querySelector(".part")) {
          row.remove();
          if (group && group.node === row) group = null;
        }
      }
      refreshActions();
    },
    /** The stored messages shown, in order. */
    messages: () => messages,
    delta(turnId, text) {
      if (!stream || stream.turnId !== turnId) {
        dropStream();
        const mdNode = el("div", { class: "md" });
        const part = el("div", { class: "part is-streaming" }, mdNode);
        const open = openGroup();
        open.body.append(part);
        open.node.setAttribute("aria-busy", "true");
        stream = { turnId, part, mdNode, text: "", shown: 0, frame: 0, group: open };
        api.setWorking(true);
      }
      stream.text += text;
      if (!stream.frame) stream.frame = requestAnimationFrame(renderStream);
    },
    /** The text streamed so far of the reply in progress ("" when none). */
    streamedText: () => (stream ? stream.text : ""),
    /** A turn ended without its final message (failure): keep what streamed, stop the caret. */
    endStream() {
      if (!stream) return;
      cancelAnimationFrame(stream.frame);
      if (stream.text) showStreaming(stream.mdNode, stream.text);
      else stream.part.remove();
      stream.part.classList.remove("is-streaming");
      stream.group.node.removeAttribute("aria-busy");
      stream = null;
    },
    /** true: the agent is working (dots until text streams); a string: what it is doing. */
    setWorking(state) {
      const label = typeof state === "string" ? state : agentName + " is thinking…";
      const wasBusy = busy;
      busy = Boolean(state);
      if (wasBusy !== busy) refreshActions();
      const show = Boolean(state) && !stream;
      if (!show) {
        working?.remove();
        working = null;
        return;
      }
      if (!working) {
        working = el("div", { class: "working", role: "status" }, el("span", { class: "dots", "aria-hidden": "true" }, el("span"), el("span"), el("span")), el("span", { class: "label" }));
        keepScrolled(() => root.append(working));
      }
      working.querySelector(".label").textContent = label;
    },
    showFailure(text, retryable) {
      api.clearFailure();
      failure = failureCard(text, retryable);
      keepScrolled(() => root.append(failure), true);
    },
    clearFailure() {
      failure?.remove();
      failure = null;
    },
    addPending(content) {
      const node = userNode(content);
      node.classList.add("is-pending");
      pending = { content, node };
      keepScrolled(() => add(node, { beforeStream: true }), true);
    },
    /** The message never reached the server: take it back (for the composer). */
    takeBackPending() {
      if (!pending) return null;
      pending.node.remove();
      const { content } = pending;
      pending = null;
      return content;
    },
    scrollToEnd() {
      scroller.scrollTop = scroller.scrollHeight;
    },
  };
  return api;
}
