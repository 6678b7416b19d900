/*
 * The thread's rows and their order: the live reply, the working indicator and the failure
 * card stay last; consecutive assistant output of one turn shares one row under the agent's
 * avatar. `t` is the thread's state (thread.js).
 */
import { el } from "./util.js";

const NEAR_BOTTOM_PX = 140;

const nearBottom = (scroller) => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_BOTTOM_PX;

export function keepScrolled(t, change, force) {
  const stick = force || nearBottom(t.scroller);
  change();
  if (stick) t.scroller.scrollTop = t.scroller.scrollHeight;
}

/** Append before the live reply, the working indicator and the failure card, which stay last. */
export function add(t, node, { beforeStream = false } = {}) {
  const { root, stream } = t;
  root.querySelector(".empty-thread")?.remove();
  const live = beforeStream && stream && stream.group.node.parentNode === root ? stream.group.node : null;
  const anchor = live || [t.working, t.failure].find((n) => n && n.parentNode === root) || null;
  root.insertBefore(node, anchor);
}

export function openGroup(t) {
  if (t.group && t.group.node.parentNode === t.root) return t.group;
  const body = el("div", { class: "body" }, el("span", { class: "visually-hidden", text: t.agentName + " said:" }));
  const node = el("div", { class: "msg msg-assistant" }, el("div", { class: "avatar", "aria-hidden": "true", text: t.initial }), body);
  add(t, node);
  t.group = { node, body };
  return t.group;
}

export function userNode(t, content) {
  t.group = null;
  const bubble = el("div", { class: "bubble", text: content });
  const node = el("div", { class: "msg msg-user" }, el("span", { class: "visually-hidden", text: "You said:" }), bubble);
  return node;
}

export function failureCard(t, text, retryable) {
  t.group = null;
  const card = el("div", { class: "failure", role: "alert" }, el("span", { class: "why", text: "The reply failed: " + text }));
  if (retryable) card.append(el("button", { type: "button", class: "btn btn-small", onclick: () => t.onRetry() }, "Retry"));
  return card;
}

export function emptyState(agentName) {
  return el(
    "div",
    { class: "empty-thread" },
    el("h2", { text: "What's on your mind?" }),
    el("p", { text: agentName + " keeps durable facts and a notes page per topic, and remembers the topics you promote with the brain icon." }),
    el("p", {}, "Try ", el("code", { text: "/remember favourite colour = teal" }), " or just start talking.")
  );
}

/** The head of a topic: "Load earlier messages", or the topic it continues. */
export function headButton(t, earlier, previous) {
  if (earlier) {
    const more = el("button", { type: "button", class: "previous-link load-earlier", onclick: () => {
      more.disabled = true;
      more.textContent = "Loading…";
      t.onLoadEarlier();
    } }, "Load earlier messages");
    return more;
  }
  if (previous) return el("button", { type: "button", class: "previous-link", onclick: () => t.onOpenTopic(previous.id) }, "Continued from “" + previous.title + "”");
  return null;
}

export function workingNode() {
  return el("div", { class: "working", role: "status" }, el("span", { class: "dots", "aria-hidden": "true" }, el("span"), el("span"), el("span")), el("span", { class: "label" }));
}
