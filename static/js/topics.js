/*
 * The topics sidebar: every topic of the session, newest first, the active one marked,
 * title and summary (expandable), and the tri-state brain toggle.
 *
 * The brain is a real <button>: its accessible name says which topic, a description
 * (aria-describedby) says the state and what a press does. A press cycles
 * gray (none) → teal (promoted) → red (deprecated) → gray and persists through
 * PUT /agents-api/topics/<id>/memory. The new state shows at once; requests for one topic
 * are sent one after another so the last press wins, and server events for a topic with
 * presses still in flight do not make the icon flicker back.
 *
 * On hover and on keyboard focus, a visible label beside the brain names its state (the
 * legend above the list explains all three the first time); screen readers get the same
 * words from the description.
 *
 * Rows are patched in place, never rebuilt, so keyboard focus stays on the button.
 */
(function (global) {
  "use strict";
  const D = global.Driftless;
  const { el, icon } = D;

  const NEXT = { none: "promoted", promoted: "deprecated", deprecated: "none" };
  const STATE_TEXT = {
    none: "Not in memory",
    promoted: "Promoted: remembered in every session",
    deprecated: "Deprecated: remembered as reversed, title only",
  };
  const ACTION_TEXT = { none: "promote it", promoted: "deprecate it", deprecated: "take it out of memory" };
  const SETTLE_MS = 1500;
  const CHANGED_TEXT = { none: "not in memory", promoted: "promoted to memory", deprecated: "deprecated" };

  D.createTopics = function createTopics({ list, api, onOpen }) {
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
      return topic.title || (topic.is_active ? "Current topic" : "Untitled topic");
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
      parts.li = el("li", { class: "topic", dataset: { topicId: String(id) } }, parts.brain, parts.open, parts.expand, parts.summary, parts.desc, parts.tip);
      return parts;
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
        ].filter(Boolean)
      );
      if (topic.is_active) row.open.setAttribute("aria-current", "true");
      else row.open.removeAttribute("aria-current");
      row.open.setAttribute("aria-label", (topic.is_active ? "Active topic: " : "Topic: ") + name);
      row.summary.textContent = topic.summary || "";
      row.summary.hidden = !topic.summary;
      row.expand.hidden = !topic.summary;
      row.expand.setAttribute("aria-label", "Show the summary of " + name);
      row.brain.dataset.state = state;
      row.brain.setAttribute("aria-label", "Memory: " + name);
      row.tip.textContent = STATE_TEXT[state] + " · click to " + ACTION_TEXT[state];
      row.tip.dataset.state = state;
      row.desc.textContent = STATE_TEXT[state] + ". Press to " + ACTION_TEXT[state] + ".";
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

    function cycle(id) {
      const next = NEXT[shownState(id)];
      const wait = pending.get(id) || { count: 0, chain: Promise.resolve() };
      wait.shown = next;
      wait.count += 1;
      pending.set(id, wait);
      patch(id);
      const sent = wait.chain.then(() => api.put("/agents-api/topics/" + id + "/memory", { state: next }));
      wait.chain = sent.catch(() => {});
      sent
        .then((payload) => {
          topics.set(id, { ...topics.get(id), ...payload });
        })
        .catch((err) => {
          D.toast("Could not change the memory of “" + title(id) + "”: " + err.message);
        })
        .finally(() => {
          wait.count -= 1;
          if (wait.count === 0) {
            pending.delete(id);
            settledAt.set(id, Date.now());
            patch(id);
            D.announce("“" + title(id) + "”: " + CHANGED_TEXT[shownState(id)]);
          }
        });
    }

    return {
      load(payloads) {
        for (const payload of payloads) upsert(payload);
      },
      upsert,
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
  };
})(window);
