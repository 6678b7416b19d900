/*
 * The conversation: messages, the reply being streamed, tool calls, the working state and
 * failures with Retry.
 *
 * Content is never parsed as HTML: user messages and tool payloads go in through
 * textContent, assistant replies through the escape-first Markdown renderer. Consecutive
 * assistant output of one turn (text, tool calls, their results, the final reply) shares
 * one row under the agent's avatar; each tool call is a compact <details> whose summary
 * says what it did in a sentence and which expands to the call and its result (JSON).
 */
(function (global) {
  "use strict";
  const D = global.Driftless;
  const { el, icon } = D;
  const md = global.DriftlessMarkdown;
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

  // While a call runs; once its result arrives, the server's sentence (tool_sentence) says what it did.
  const RUNNING_WORDS = { important_info: "Checking the facts…", notes: "Working on the notes…", manage_topic_memory: "Changing what is remembered…", recall: "Searching past chats…" };
  const asObject = (value) => {
    const parsed = parseJson(value);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
  };

  D.createThread = function createThread({ root, scroller, agentName, onRetry, onOpenTopic, onLoadEarlier }) {
    const rendered = new Map(); // message id -> node
    const chips = new Map(); // tool call id -> chip parts
    let group = null; // the open assistant row { node, body }
    let stream = null; // { turnId, part, mdNode, text, shown, frame, group }
    let working = null;
    let failure = null;
    let pending = null; // the user's message on its way: { content, node }
    const initial = (agentName || "?").trim().charAt(0).toUpperCase();

    const nearBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_BOTTOM_PX;

    function keepScrolled(change, force) {
      const stick = force || nearBottom();
      change();
      if (stick) scroller.scrollTop = scroller.scrollHeight;
    }

    /** Append before the working indicator and the failure card, which stay last. */
    function add(node) {
      root.querySelector(".empty-thread")?.remove();
      const anchor = working || failure;
      root.insertBefore(node, anchor && anchor.parentNode === root ? anchor : null);
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
      return el("div", { class: "msg msg-user" }, el("span", { class: "visually-hidden", text: "You said:" }), el("div", { class: "bubble", text: content }));
    }

    /** A tool call: what it did in a sentence; the call and its result (JSON) behind a disclosure. */
    function toolChip(call) {
      const fn = call.function || {};
      const name = fn.name || call.name || "tool";
      const args = fn.arguments !== undefined ? fn.arguments : call.arguments;
      const sentence = el("span", { class: "tool-brief", text: RUNNING_WORDS[name] || "Using " + name + "…" });
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
      if (message.content) mdNode.innerHTML = md.render(message.content);
      else mdNode.remove();
      const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
      if (calls.length) part.append(el("div", { class: "tools" }, calls.map(toolChip)));
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
      if (retryable) {
        card.append(
          el("button", { type: "button", class: "btn btn-small", onclick: () => onRetry() }, "Retry")
        );
      }
      return card;
    }

    function append(message, { live = true } = {}) {
      if (message.id && rendered.has(message.id)) return;
      let node = null;
      if (message.role === "user") {
        if (pending && pending.content === message.content) {
          node = pending.node;
          node.classList.remove("is-pending");
          pending = null;
          if (!node.isConnected) add(node);
        } else {
          node = userNode(message.content);
          add(node);
        }
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
      if (node && message.id) rendered.set(message.id, node);
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
      stream.frame = 0;
      const { text } = stream;
      let shown = Math.min(text.length, stream.shown + Math.ceil((text.length - stream.shown) / REVEAL_FRAMES));
      const code = text.charCodeAt(shown - 1);
      if (code >= 0xd800 && code <= 0xdbff) shown += 1; // never split a surrogate pair
      stream.shown = shown;
      keepScrolled(() => {
        stream.mdNode.innerHTML = md.render(text.slice(0, shown));
      });
      if (shown < text.length) stream.frame = requestAnimationFrame(renderStream);
    }

    const api = {
      /**
       * Show a topic's messages. `previous` is {id, title} of the topic it continues, if any;
       * `earlier`: there are older messages (a "Load earlier messages" button comes first);
       * `keepScroll`: messages were added above, so keep the reader where they were.
       */
      render(messages, { previous = null, readOnly = false, earlier = false, keepScroll = false } = {}) {
        const live = stream && !readOnly ? stream.group.node : null;
        const fromBottom = scroller.scrollHeight - scroller.scrollTop;
        root.replaceChildren();
        rendered.clear();
        chips.clear();
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
        const last = messages[messages.length - 1];
        const retryable = !readOnly && last !== undefined && last.role === "error";
        (retryable ? messages.slice(0, -1) : messages).forEach((message) => append(message, { live: false }));
        if (retryable) {
          failure = failureCard(last.content, true);
          root.append(failure);
        }
        if (live) {
          root.append(live);
          group = stream.group;
        }
        if (pending && !readOnly) root.append(pending.node);
        else pending = null;
        if (!messages.length && !live && !pending) root.append(emptyState());
        if (working && !readOnly) root.append(working);
        scroller.scrollTop = keepScroll ? scroller.scrollHeight - fromBottom : scroller.scrollHeight;
        if (keepScroll) (root.querySelector(".load-earlier") || root).focus({ preventScroll: true });
      },
      append(message) {
        keepScrolled(() => append(message));
      },
      has: (id) => rendered.has(id),
      delta(turnId, text) {
        if (!stream || stream.turnId !== turnId) {
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
      /** A turn ended without its final message (failure): keep what streamed, stop the caret. */
      endStream() {
        if (!stream) return;
        cancelAnimationFrame(stream.frame);
        if (stream.text) stream.mdNode.innerHTML = md.render(stream.text);
        else stream.part.remove();
        stream.part.classList.remove("is-streaming");
        stream.group.node.removeAttribute("aria-busy");
        stream = null;
      },
      /** true: the agent is working (dots until text streams); a string: what it is doing. */
      setWorking(state) {
        const label = typeof state === "string" ? state : agentName + " is thinking…";
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
        keepScrolled(() => add(node), true);
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
  };
})(window);
