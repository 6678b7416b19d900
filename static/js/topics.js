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
 * Rows are patched in place, never rebuilt, so keyboard focus stays on the button.
 */
import { el, icon, toast, announce } from "./util.js";
import { url } from "./config.js";

const NEXT = { none: "promoted", promoted: "deprecated", deprecated: "none" };
const STATE_TEXT = {
  none: "Not in memory",
  promoted: "In memory: remembered in every session",
  deprecated: "No longer true: remembered as reversed, by its title only",
};
const SUGGESTED_TEXT = "Suggested for memory: your choice (it draws on an outside tool's results)";
const ACTION_TEXT = { none: "remember it in every session", promoted: "mark it no longer true", deprecated: "take it out of memory" };
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

export function createTopics({ list, api, onOpen, onDeleted }) {
  const topics = new Map(); // id -> topic payload (server truth)
  const rows = new Map(); // id -> row parts
  const pending = new Map(); // id -> { shown, count, chain }
  const settledAt = new Map(); // id -> when its last press was answered
  let viewedId = null;
  // The active topic changes only when another one becomes active (topic.created); the
  // prior topic's own update (summarized, no longer active) may arrive first.
  let activeId = null;

  function title(id) {
    const topic = topics.get(id);
    if (!topic) return "";
    return !topic.title && topic.is_active ? "Current topic" : topic.shown_title;
  }

  function shownState(id) {
    const wait = pending.get(id);
    return wait ? wait.shown : topics.get(id).memory_state;
  }


  function buildRow(id) {
    const descId = "brain-state-" + id;
    const summaryId = "topic-summary-" + id;
    const parts = {};
    parts.brain = el(
      "button",
      { type: "button", class: "brain", "aria-describedby": descId, onclick: () => cycle(id) },
      icon("brain", "brain-icon")
    );
    parts.desc = el("span", { id: descId, class: "visually-hidden" });
    parts.tip = el("span", { class: "brain-tip", "aria-hidden": "true" });
    parts.title = el("span", { class: "topic-title" });
    parts.meta = el("span", { class: "topic-meta" });
    parts.open = el("button", { type: "button", class: "topic-open", onclick: () => onOpen(id) }, parts.title, parts.meta);
    parts.summary = el("p", { class: "topic-summary", id: summaryId });
    parts.expand = el(
      "button",
      { type: "button", class: "topic-expand", "aria-expanded": "false", "aria-controls": summaryId, onclick: () => toggleSummary(id) },
      icon("chevron-down")
    );
    parts.edit = el("button", { type: "button", class: "btn btn-quiet btn-small", onclick: () => edit(id) }, icon("edit"), "Edit");
    parts.remove = el("button", { type: "button", class: "btn btn-quiet btn-small btn-danger", onclick: () => confirmDelete(id) }, icon("trash"), "Delete");
    parts.actions = el("div", { class: "topic-actions" }, parts.edit, parts.remove);
    parts.li = el("li", { class: "topic", dataset: { topicId: String(id) } }, parts.brain, parts.open, parts.expand, parts.summary, parts.actions, parts.desc, parts.tip);
    return parts;
  }

  function edit(id) {
    const row = rows.get(id);
    const close = () => {
      form.remove();
      row.actions.hidden = false;
      row.edit.focus();
    };
    const form = topicEditor({
      api,
      topic: topics.get(id),
      onSaved: (payload) => {
        upsert(payload);
        close();
        announce("“" + title(id) + "” saved");
      },
      onCancel: close,
    });
    row.actions.hidden = true;
    row.li.append(form);
  }

  function confirmDelete(id) {
    const row = rows.get(id);
    const restore = () => {
      box.remove();
      row.actions.hidden = false;
      row.remove.focus();
    };
    const remove = el("button", { type: "button", class: "btn btn-small btn-danger", onclick: doDelete }, "Delete permanently");
    const box = el(
      "div",
      { class: "topic-confirm", role: "group", "aria-label": "Delete “" + title(id) + "”?" },
      el("p", { text: "Delete “" + title(id) + "” permanently? Its messages and notes go too" + (topics.get(id).memory_state === "none" ? "" : ", and it leaves memory") + ". This cannot be undone." }),
      el("div", { class: "form-row" }, el("button", { type: "button", class: "btn btn-small", onclick: restore }, "Keep"), remove)
    );
    row.actions.hidden = true;
    row.li.append(box);
    remove.focus();
    async function doDelete() {
      try {
        await api.del(url("topic", { topic_id: id }));
      } catch (err) {
        toast("Could not delete “" + title(id) + "”: " + err.message);
        restore();
        return;
      }
      const name = title(id);
      drop(id);
      announce("“" + name + "” deleted");
      if (onDeleted) onDeleted(id);
    }
  }

  function drop(id) {
    const row = rows.get(id);
    if (row) row.li.remove();
    rows.delete(id);
    topics.delete(id);
  }

  function toggleSummary(id) {
    const row = rows.get(id);
    const open = !row.li.classList.contains("is-expanded");
    row.li.classList.toggle("is-expanded", open);
    row.expand.setAttribute("aria-expanded", String(open));
  }

  function patch(id) {
    const topic = topics.get(id);
    const row = rows.get(id);
    const name = title(id);
    const state = shownState(id);
    row.li.classList.toggle("is-active", topic.is_active);
    row.li.classList.toggle("is-viewed", id === viewedId);
    row.title.textContent = name;
    row.title.classList.toggle("untitled", !topic.title);
    row.li.title = topic.summary ? name + "\n\n" + topic.summary : name;
    row.meta.replaceChildren(
      ...[
        topic.is_active ? el("span", { class: "badge", text: "Active" }) : null,
        topic.origin === "drift" ? el("span", { text: "forked by drift" }) : null,
        // Nothing enters memory untitled: the server summarizes the topic first.
        pending.has(id) && !topic.summary && state !== "none" ? el("span", { class: "summarizing", text: "summarizing…" }) : null,
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
    if (pending.has(id)) row.brain.setAttribute("aria-busy", "true");
    else row.brain.removeAttribute("aria-busy");
  }

  function place(id) {
    const row = rows.get(id);
    // Newest first: before the first row with a smaller id.
    const next = [...list.children].find((li) => Number(li.dataset.topicId) < id);
    if (row.li.parentNode !== list || row.li.nextSibling !== (next || null)) list.insertBefore(row.li, next || null);
  }

  /** Take a topic payload from the server (page load or event). */
  function upsert(payload, { fresh = false } = {}) {
    const id = payload.id;
    const known = topics.get(id);
    // An event may overtake the answer of a press it is older than: while presses are in
    // flight, and briefly after, the answers decide the memory state, not the events.
    const recent = pending.has(id) || Date.now() - (settledAt.get(id) || 0) < SETTLE_MS;
    const keep = known && recent ? { memory_state: known.memory_state } : {};
    topics.set(id, { ...known, ...payload, ...keep });
    if (payload.is_active) {
      activeId = id;
      for (const [other, topic] of topics) {
        if (other !== id && topic.is_active) {
          topic.is_active = false;
          if (rows.has(other)) patch(other);
        }
      }
    }
    if (!rows.has(id)) {
      rows.set(id, buildRow(id));
      place(id);
      if (fresh) rows.get(id).li.classList.add("is-new");
    }
    patch(id);
  }

  /** A press: the next state. Landing on red (easy to reach by one click too many) offers Undo. */
  function cycle(id) {
    const from = shownState(id);
    setState(id, NEXT[from], from === "promoted" ? from : null);
  }

  function setState(id, next, undoTo = null) {
    const wait = pending.get(id) || { count: 0, chain: Promise.resolve() };
    wait.shown = next;
    wait.count += 1;
    pending.set(id, wait);
    patch(id);
    const sent = wait.chain.then(() => api.put(url("topicMemory", { topic_id: id }), { state: next }));
    wait.chain = sent.catch(() => {});
    sent
      .then((payload) => {
        topics.set(id, { ...topics.get(id), ...payload });
      })
      .catch((err) => {
        toast("Could not change the memory of “" + title(id) + "”: " + err.message);
      })
      .finally(() => {
        wait.count -= 1;
        if (wait.count === 0) {
          pending.delete(id);
          settledAt.set(id, Date.now());
          patch(id);
          announce("“" + title(id) + "”: " + CHANGED_TEXT[shownState(id)]);
          if (undoTo && shownState(id) === next) {
            toast("“" + title(id) + "” is now marked as no longer true: remembered by its title only.", { label: "Undo", run: () => setState(id, undoTo) });
          }
        }
      });
  }

  return {
    load(payloads) {
      for (const payload of payloads) upsert(payload);
    },
    upsert,
    remove: drop,
    get: (id) => topics.get(id),
    all: () => [...topics.values()].sort((a, b) => a.id - b.id),
    title,
    activeId: () => activeId,
    setViewed(id) {
      const before = viewedId;
      viewedId = id;
      if (before !== null && rows.has(before)) patch(before);
      if (rows.has(id)) patch(id);
    },
    /** The topic created before `id` (what the active one continues from). */
    previousOf(id) {
      const older = [...topics.keys()].filter((other) => other < id);
      return older.length ? Math.max(...older) : null;
    },
  };
}
