/*
 * The topics sidebar: every topic of the session, newest first, the active one marked,
 * title and summary (expandable), and the tri-state brain toggle.
 *
 * The brain is a real <button>: its accessible name says which topic, a description
 * (aria-describedby) says the state and what a press does. A press cycles
 * gray (none) → teal (promoted) → red (deprecated) → gray and persists through
 * a PUT to the topic's memory URL; landing on red offers Undo in a toast (one click too
 * many must not quietly reverse a topic). The new state shows at once; requests for one topic
 * are sent one after another so the last press wins, and server events for a topic with
 * presses still in flight do not make the icon flicker back.
 *
 * A topic whose summary asked for memory but drew on an outside tool's results waits for
 * the user (memory_suggested): its gray brain is outlined in teal, "suggested for memory:
 * your choice"; a press promotes it as usual.
 *
 * On hover and on keyboard focus, a visible label beside the brain names its state (the
 * legend above the list explains all three the first time); screen readers get the same
 * words from the description.
 *
 * Rows are patched in place, never rebuilt, so keyboard focus stays on the button
 * (topic-row.js builds and patches them). `s` is the sidebar's state (createTopics).
 */
import { el, toast, announce } from "./util.js";
import { url } from "./config.js";
import { title, shownState, buildRow, patch } from "./topic-row.js";

const NEXT = { none: "promoted", promoted: "deprecated", deprecated: "none" };
const SETTLE_MS = 1500;
const CHANGED_TEXT = { none: "not in memory", promoted: "promoted to memory", deprecated: "deprecated" };

/**
 * An inline form to correct a topic's title and summary (a PATCH of the topic).
 * The answer (the topic as it now is) goes to onSaved; Escape or Cancel to onCancel.
 */
export function topicEditor({ api, topic, onSaved, onCancel }) {
  const uid = "topic-edit-" + topic.id + "-" + Math.random().toString(36).slice(2, 7);
  const titleInput = el("input", { id: uid + "-title", maxlength: "200", required: true });
  titleInput.value = topic.title || "";
  const summaryInput = el("textarea", { id: uid + "-summary", rows: "4" });
  summaryInput.value = topic.summary || "";
  const error = el("p", { class: "form-error", role: "alert", hidden: true });
  const form = el(
    "form",
    { class: "topic-edit", onsubmit: save },
    el("label", { for: uid + "-title", text: "Title" }),
    titleInput,
    el("label", { for: uid + "-summary", text: "Summary" }),
    summaryInput,
    el("p", { class: "form-hint", text: "Your words stay until the topic gets new messages; the next summary builds on them." }),
    error,
    el("div", { class: "form-row" }, el("button", { type: "button", class: "btn btn-small", onclick: () => onCancel() }, "Cancel"), el("button", { type: "submit", class: "btn btn-primary btn-small" }, "Save"))
  );
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      onCancel();
    }
  });
  async function save(event) {
    event.preventDefault();
    error.hidden = true;
    try {
      const payload = await api.patch(url("topic", { topic_id: topic.id }), { title: titleInput.value, summary: summaryInput.value });
      onSaved(payload);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    }
  }
  requestAnimationFrame(() => titleInput.focus());
  return form;
}

function edit(s, id) {
  const row = s.rows.get(id);
  const close = () => {
    form.remove();
    row.actions.hidden = false;
    row.edit.focus();
  };
  const form = topicEditor({
    api: s.api,
    topic: s.topics.get(id),
    onSaved: (payload) => {
      upsert(s, payload);
      close();
      announce("“" + title(s, id) + "” saved");
    },
    onCancel: close,
  });
  row.actions.hidden = true;
  row.li.append(form);
}

async function deleteTopic(s, id, restore) {
  try {
    await s.api.del(url("topic", { topic_id: id }));
  } catch (err) {
    toast("Could not delete “" + title(s, id) + "”: " + err.message);
    restore();
    return;
  }
  const name = title(s, id);
  drop(s, id);
  announce("“" + name + "” deleted");
  if (s.onDeleted) s.onDeleted(id);
}

function confirmDelete(s, id) {
  const row = s.rows.get(id);
  const restore = () => {
    box.remove();
    row.actions.hidden = false;
    row.remove.focus();
  };
  const name = title(s, id);
  const remove = el("button", { type: "button", class: "btn btn-small btn-danger", onclick: () => deleteTopic(s, id, restore) }, "Delete permanently");
  const box = el(
    "div",
    { class: "topic-confirm", role: "group", "aria-label": "Delete “" + name + "”?" },
    el("p", { text: "Delete “" + name + "” permanently? Its messages and notes go too" + (s.topics.get(id).memory_state === "none" ? "" : ", and it leaves memory") + ". This cannot be undone." }),
    el("div", { class: "form-row" }, el("button", { type: "button", class: "btn btn-small", onclick: restore }, "Keep"), remove)
  );
  row.actions.hidden = true;
  row.li.append(box);
  remove.focus();
}

function drop(s, id) {
  const row = s.rows.get(id);
  if (row) row.li.remove();
  s.rows.delete(id);
  s.topics.delete(id);
}

function toggleSummary(s, id) {
  const row = s.rows.get(id);
  const open = !row.li.classList.contains("is-expanded");
  row.li.classList.toggle("is-expanded", open);
  row.expand.setAttribute("aria-expanded", String(open));
}

function place(s, id) {
  const row = s.rows.get(id);
  // Newest first: before the first row with a smaller id.
  const next = [...s.list.children].find((li) => Number(li.dataset.topicId) < id);
  if (row.li.parentNode !== s.list || row.li.nextSibling !== (next || null)) s.list.insertBefore(row.li, next || null);
}

/** Take a topic payload from the server (page load or event). */
function upsert(s, payload, { fresh = false } = {}) {
  const id = payload.id;
  const known = s.topics.get(id);
  // An event may overtake the answer of a press it is older than: while presses are in
  // flight, and briefly after, the answers decide the memory state, not the events.
  const recent = s.pending.has(id) || Date.now() - (s.settledAt.get(id) || 0) < SETTLE_MS;
  const keep = known && recent ? { memory_state: known.memory_state } : {};
  s.topics.set(id, { ...known, ...payload, ...keep });
  if (payload.is_active) {
    s.activeId = id;
    for (const [other, topic] of s.topics) {
      if (other !== id && topic.is_active) {
        topic.is_active = false;
        if (s.rows.has(other)) patch(s, other);
      }
    }
  }
  if (!s.rows.has(id)) {
    s.rows.set(id, buildRow(s, id));
    place(s, id);
    if (fresh) s.rows.get(id).li.classList.add("is-new");
  }
  patch(s, id);
}

/** A press: the next state. Landing on red (easy to reach by one click too many) offers Undo. */
function cycle(s, id) {
  const from = shownState(s, id);
  setState(s, id, NEXT[from], from === "promoted" ? from : null);
}

/** Every press of a topic answered: the state shown is the server's; red offers Undo. */
function settled(s, id, next, undoTo) {
  s.pending.delete(id);
  s.settledAt.set(id, Date.now());
  patch(s, id);
  announce("“" + title(s, id) + "”: " + CHANGED_TEXT[shownState(s, id)]);
  if (undoTo && shownState(s, id) === next) {
    toast("“" + title(s, id) + "” is now marked as no longer true: remembered by its title only.", { label: "Undo", run: () => setState(s, id, undoTo) });
  }
}

function setState(s, id, next, undoTo = null) {
  const wait = s.pending.get(id) || { count: 0, chain: Promise.resolve() };
  wait.shown = next;
  wait.count += 1;
  s.pending.set(id, wait);
  patch(s, id);
  const sent = wait.chain.then(() => s.api.put(url("topicMemory", { topic_id: id }), { state: next }));
  wait.chain = sent.catch(() => {});
  sent
    .then((payload) => {
      s.topics.set(id, { ...s.topics.get(id), ...payload });
    })
    .catch((err) => {
      toast("Could not change the memory of “" + title(s, id) + "”: " + err.message);
    })
    .finally(() => {
      wait.count -= 1;
      if (wait.count === 0) settled(s, id, next, undoTo);
    });
}

function setViewed(s, id) {
  const before = s.viewedId;
  s.viewedId = id;
  if (before !== null && s.rows.has(before)) patch(s, before);
  if (s.rows.has(id)) patch(s, id);
}

export function createTopics({ list, api, onOpen, onDeleted }) {
  const s = {
    list,
    api,
    onOpen,
    onDeleted,
    topics: new Map(), // id -> topic payload (server truth)
    rows: new Map(), // id -> row parts
    pending: new Map(), // id -> { shown, count, chain }
    settledAt: new Map(), // id -> when its last press was answered
    viewedId: null,
    // The active topic changes only when another one becomes active (topic.created); the
    // prior topic's own update (summarized, no longer active) may arrive first.
    activeId: null,
  };
  s.actions = { cycle: (id) => cycle(s, id), edit: (id) => edit(s, id), confirmDelete: (id) => confirmDelete(s, id), toggleSummary: (id) => toggleSummary(s, id) };
  return {
    load(payloads) {
      for (const payload of payloads) upsert(s, payload);
    },
    upsert: (payload, options) => upsert(s, payload, options),
    remove: (id) => drop(s, id),
    get: (id) => s.topics.get(id),
    all: () => [...s.topics.values()].sort((a, b) => a.id - b.id),
    title: (id) => title(s, id),
    activeId: () => s.activeId,
    setViewed: (id) => setViewed(s, id),
    /** The topic created before `id` (what the active one continues from). */
    previousOf(id) {
      const older = [...s.topics.keys()].filter((other) => other < id);
      return older.length ? Math.max(...older) : null;
    },
  };
}
