/*
 * One row of the topics sidebar (topics.js): built once, then patched in place so keyboard
 * focus stays on its buttons. `s` is the sidebar's state (createTopics); s.actions its
 * handlers (cycle, edit, confirmDelete, toggleSummary).
 */
import { el, icon } from "./util.js";

const STATE_TEXT = {
  none: "Not in memory",
  promoted: "In memory: remembered in every session",
  deprecated: "No longer true: remembered as reversed, by its title only",
};
const SUGGESTED_TEXT = "Suggested for memory: your choice (it draws on an outside tool's results)";
const ACTION_TEXT = { none: "remember it in every session", promoted: "mark it no longer true", deprecated: "take it out of memory" };

export function title(s, id) {
  const topic = s.topics.get(id);
  if (!topic) return "";
  return !topic.title && topic.is_active ? "Current topic" : topic.shown_title;
}

export function shownState(s, id) {
  const wait = s.pending.get(id);
  return wait ? wait.shown : s.topics.get(id).memory_state;
}

export function buildRow(s, id) {
  const { actions } = s;
  const descId = "brain-state-" + id;
  const summaryId = "topic-summary-" + id;
  const parts = {};
  parts.brain = el(
    "button",
    { type: "button", class: "brain", "aria-describedby": descId, onclick: () => actions.cycle(id) },
    icon("brain", "brain-icon")
  );
  parts.desc = el("span", { id: descId, class: "visually-hidden" });
  parts.tip = el("span", { class: "brain-tip", "aria-hidden": "true" });
  parts.title = el("span", { class: "topic-title" });
  parts.meta = el("span", { class: "topic-meta" });
  parts.open = el("button", { type: "button", class: "topic-open", onclick: () => s.onOpen(id) }, parts.title, parts.meta);
  parts.summary = el("p", { class: "topic-summary", id: summaryId });
  parts.expand = el(
    "button",
    { type: "button", class: "topic-expand", "aria-expanded": "false", "aria-controls": summaryId, onclick: () => actions.toggleSummary(id) },
    icon("chevron-down")
  );
  parts.edit = el("button", { type: "button", class: "btn btn-quiet btn-small", onclick: () => actions.edit(id) }, icon("edit"), "Edit");
  parts.remove = el("button", { type: "button", class: "btn btn-quiet btn-small btn-danger", onclick: () => actions.confirmDelete(id) }, icon("trash"), "Delete");
  parts.actions = el("div", { class: "topic-actions" }, parts.edit, parts.remove);
  parts.li = el("li", { class: "topic", dataset: { topicId: String(id) } }, parts.brain, parts.open, parts.expand, parts.summary, parts.actions, parts.desc, parts.tip);
  return parts;
}

function patchBrain(s, id, row, name, state) {
  const topic = s.topics.get(id);
  const suggested = state === "none" && Boolean(topic.memory_suggested);
  const stateText = suggested ? SUGGESTED_TEXT : STATE_TEXT[state];
  row.brain.dataset.state = state;
  row.brain.toggleAttribute("data-suggested", suggested);
  row.brain.setAttribute("aria-label", "Memory: " + name);
  if (suggested) row.brain.title = "Suggested for memory: your choice";
  else row.brain.removeAttribute("title");
  row.tip.textContent = stateText + " · click to " + ACTION_TEXT[state];
  row.tip.dataset.state = state;
  row.desc.textContent = stateText + ". Press to " + ACTION_TEXT[state] + ".";
  if (s.pending.has(id)) row.brain.setAttribute("aria-busy", "true");
  else row.brain.removeAttribute("aria-busy");
}

export function patch(s, id) {
  const topic = s.topics.get(id);
  const row = s.rows.get(id);
  const name = title(s, id);
  const state = shownState(s, id);
  row.li.classList.toggle("is-active", topic.is_active);
  row.li.classList.toggle("is-viewed", id === s.viewedId);
  row.title.textContent = name;
  row.title.classList.toggle("untitled", !topic.title);
  row.li.title = topic.summary ? name + "\n\n" + topic.summary : name;
  row.meta.replaceChildren(
    ...[
      topic.is_active ? el("span", { class: "badge", text: "Active" }) : null,
      topic.origin === "drift" ? el("span", { text: "forked by drift" }) : null,
      // Nothing enters memory untitled: the server summarizes the topic first.
      s.pending.has(id) && !topic.summary && state !== "none" ? el("span", { class: "summarizing", text: "summarizing…" }) : null,
    ].filter(Boolean)
  );
  if (topic.is_active) row.open.setAttribute("aria-current", "true");
  else row.open.removeAttribute("aria-current");
  row.open.setAttribute("aria-label", (topic.is_active ? "Active topic: " : "Topic: ") + name);
  row.summary.textContent = topic.summary || "";
  row.summary.hidden = !topic.summary;
  row.expand.setAttribute("aria-label", "More about " + name); // the summary, Edit and Delete
  row.edit.setAttribute("aria-label", "Edit “" + name + "”");
  row.remove.setAttribute("aria-label", "Delete “" + name + "”");
  row.remove.hidden = topic.is_active; // the active topic stays: a session always has one
  patchBrain(s, id, row, name, state);
}
