/*
 * The reply being streamed: deltas go into one part of the agent's row, revealed over a
 * few animation frames, as text (the stored reply replaces it with the server's HTML).
 * `t` is the thread's state (thread.js); t.stream is { turnId, part, mdNode, text, shown,
 * frame, group } while a reply streams.
 */
import { el } from "./util.js";
import { showRendered, showStreaming } from "./render.js";
import { keepScrolled, openGroup } from "./thread-rows.js";

// The server sends reply text in batches (at most one event per ~100 ms): each batch is
// revealed over about this many animation frames, so the text flows as it did token by
// token while the next batch is on its way.
const REVEAL_FRAMES = 6;

/** One animation frame of the stream: reveal a share of what has arrived. */
function renderStream(t) {
  const { stream } = t;
  if (!stream) return;
  stream.frame = 0;
  if (stream.html !== null) {
    // The server's rendering of the reply so far (its stored replies' rules): shown whole.
    stream.shown = stream.text.length;
    keepScrolled(t, () => showRendered(stream.mdNode, stream.html, stream.text));
    return;
  }
  const { text } = stream;
  let shown = Math.min(text.length, stream.shown + Math.ceil((text.length - stream.shown) / REVEAL_FRAMES));
  const code = text.charCodeAt(shown - 1);
  if (code >= 0xd800 && code <= 0xdbff) shown += 1; // never split a surrogate pair
  stream.shown = shown;
  keepScrolled(t, () => showStreaming(stream.mdNode, text.slice(0, shown)));
  if (shown < text.length) stream.frame = requestAnimationFrame(() => renderStream(t));
}

export function dropStream(t) {
  const { stream } = t;
  if (!stream) return;
  cancelAnimationFrame(stream.frame);
  stream.part.remove();
  if (!stream.group.body.querySelector(".part")) stream.group.node.remove();
  t.stream = null;
}

/** Text of a turn's reply arrived (with `html`, the server's rendering of the reply so
 * far); returns true when a new stream began. */
export function addDelta(t, turnId, text, html) {
  let started = false;
  if (!t.stream || t.stream.turnId !== turnId) {
    dropStream(t);
    const mdNode = el("div", { class: "md" });
    const part = el("div", { class: "part is-streaming" }, mdNode);
    const open = openGroup(t);
    open.body.append(part);
    open.node.setAttribute("aria-busy", "true");
    t.stream = { turnId, part, mdNode, text: "", html: null, shown: 0, frame: 0, group: open };
    started = true;
  }
  t.stream.text += text;
  if (typeof html === "string") t.stream.html = html;
  if (!t.stream.frame) t.stream.frame = requestAnimationFrame(() => renderStream(t));
  return started;
}

/** The stored reply arrived: its part is the streamed one, no longer streaming. */
export function takeStream(t) {
  const { stream } = t;
  const { part, mdNode } = stream;
  cancelAnimationFrame(stream.frame);
  part.classList.remove("is-streaming");
  stream.group.node.removeAttribute("aria-busy");
  t.group = stream.group;
  t.stream = null;
  return { part, mdNode };
}

/** A turn ended without its final message (failure): keep what streamed, stop the caret. */
export function endStream(t) {
  const { stream } = t;
  if (!stream) return;
  cancelAnimationFrame(stream.frame);
  if (stream.html !== null) showRendered(stream.mdNode, stream.html, stream.text);
  else if (stream.text) showStreaming(stream.mdNode, stream.text);
  else stream.part.remove();
  stream.part.classList.remove("is-streaming");
  stream.group.node.removeAttribute("aria-busy");
  t.stream = null;
}
