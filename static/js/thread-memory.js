/*
 * "Memory in this reply": under an assistant reply, a compact line that opens to what its
 * request carried from memory (persistent-memory entries, facts, the topic's notes,
 * passages recalled from earlier conversations: each a link to where it lives) and what
 * the turn stored or changed ("Remembered: passport = expires in May", with Undo). All of
 * it is the reply's stored `memory_trace` (memory/actions/memory_trace.py): the same after
 * a reload. Titles, keys and sentences are stored text: set as text only (el()).
 *
 * `t` is the thread's state (thread.js): t.sessionId, t.onOpenTopic, t.onOpenPanel and
 * t.onUndoChange (a promise: the change undone) come from the page.
 */
import { el, announce } from "./util.js";
import { url } from "./config.js";
import { topicLinker } from "./panel-consolidation.js";

const KIND_WORDS = {
  memory: ["memory entry", "memory entries"],
  fact: ["fact", "facts"],
  notes: ["notes", "notes"],
  recalled: ["recalled passage", "recalled passages"],
};
const KIND_TITLES = { memory: "From memory", fact: "Facts", notes: "Notes", recalled: "Recalled from earlier conversations" };

const counted = (kind, count) => count + " " + KIND_WORDS[kind][count === 1 ? 0 : 1];

/** "2 memory entries, 1 fact" of what the request carried ("" when nothing). */
function carriedWords(carried) {
  return Object.keys(KIND_WORDS)
    .map((kind) => [kind, carried.filter((item) => item.kind === kind).length])
    .filter(([, count]) => count > 0)
    .map(([kind, count]) => (kind === "notes" ? "this topic's notes" : counted(kind, count)))
    .join(", ");
}

/** One carried item, as a link to where it lives. */
function carriedItem(t, item, link) {
  if (item.kind === "fact") {
    return el("button", { type: "button", class: "linklike memory-fact", text: item.key, onclick: () => t.onOpenPanel?.("facts") });
  }
  if (item.kind === "notes") {
    return el("button", { type: "button", class: "linklike", text: "This topic's notes", onclick: () => t.onOpenPanel?.("notes") });
  }
  const where = link({ topic_id: item.topic_id, session_id: item.session_id, title: item.title });
  if (item.kind === "recalled" && item.date) return el("span", {}, where, " · " + item.date);
  return where;
}

function carriedList(t, carried) {
  const link = topicLinker({ sessionId: t.sessionId, onOpenTopic: t.onOpenTopic });
  return Object.keys(KIND_WORDS)
    .map((kind) => [kind, carried.filter((item) => item.kind === kind)])
    .filter(([, items]) => items.length)
    .map(([kind, items]) =>
      el("div", { class: "memory-kind", "data-kind": kind }, el("h4", { text: KIND_TITLES[kind] }), el("ul", {}, items.map((item) => el("li", {}, carriedItem(t, item, link)))))
    );
}

/** One change the turn made, with Undo for a fact (the Facts panel keeps its history). */
function changeRow(t, change) {
  const row = el("li", { class: "memory-change" }, el("span", { class: "memory-sentence", text: change.sentence }));
  if (change.kind === "fact" && t.onUndoChange) {
    const undo = el("button", { type: "button", class: "btn btn-quiet btn-small", text: "Undo", "aria-label": "Undo: " + change.sentence });
    undo.addEventListener("click", async () => {
      undo.disabled = true;
      try {
        await t.onUndoChange(change);
        undo.replaceWith(el("span", { class: "memory-undone", text: "Undone" }));
        announce("Undone: " + change.sentence);
      } catch (err) {
        undo.disabled = false;
        announce("Could not undo: " + err.message);
      }
    });
    row.append(" ", undo);
  }
  return row;
}

/** The line under a reply ("Memory in this reply: …"), or null when it used and changed none. */
export function memoryLine(t, message) {
  const trace = message.memory_trace || {};
  const carried = Array.isArray(trace.carried) ? trace.carried : [];
  const changed = Array.isArray(trace.changed) ? trace.changed : [];
  if (!carried.length && !changed.length) return null;
  // A change is said once: a command's sentence here (its tool card is not shown), a tool
  // call's in its card above (here counted, and listed with Undo when opened).
  const changes = trace.command ? changed.map((change) => change.sentence).join("; ") : changed.length ? "changed: " + changed.length : "";
  const words = [carriedWords(carried), changes].filter(Boolean).join(" · ");
  const body = el("div", { class: "memory-body" }, ...carriedList(t, carried));
  if (changed.length) body.append(el("div", { class: "memory-kind", "data-kind": "changed" }, el("h4", { text: "Stored or changed by this turn" }), el("ul", {}, changed.map((change) => changeRow(t, change)))));
  return el("details", { class: "memory-line" }, el("summary", {}, el("span", { class: "memory-label", text: "Memory in this reply: " }), el("span", { class: "memory-words", text: words })), body);
}

/** What a fact's change was: read its history, then put the value before back (or remove it). */
export async function undoFactChange(api, sessionId, change) {
  const factUrl = url("sessionFact", { session_id: sessionId, key: change.key });
  const detail = await api.get(factUrl);
  const last = (detail.history || [])[0];
  if (!last) throw new Error("this fact has no history to undo");
  if (last.old_value === null || last.old_value === undefined) return api.del(factUrl);
  return api.put(factUrl, { value: last.old_value });
}
