/*
 * The sessions list beside the chat: the user's sessions, latest first, each a link to its
 * chat page, the current one marked, with Rename (PATCH /agents-api/sessions/<id>/) and
 * Delete (a link to the page that asks for confirmation, /sessions/<id>/delete/).
 *
 * The list arrives with the page; the current session's row follows its own events (a new
 * message moves it to the top, its active topic names it while it has no title of its
 * own), and the whole list is read again when the tab comes back into view, so sessions
 * started, renamed or deleted elsewhere show up.
 *
 * Rename is inline: the row's title becomes a text field; Enter saves, Escape cancels,
 * focus returns to the Rename button. An empty title goes back to the automatic one.
 */
(function (global) {
  "use strict";
  const D = global.Driftless;
  const { el, icon } = D;
  const UNTITLED = "New conversation";

  /** "just now" under a minute, then minutes, hours, days: what the home page says too. */
  function ago(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (!Number.isFinite(seconds) || seconds < 60) return "just now";
    const [size, unit] = seconds < 3600 ? [60, "minute"] : seconds < 86400 ? [3600, "hour"] : [86400, "day"];
    const n = Math.floor(seconds / size);
    return n + " " + unit + (n === 1 ? "" : "s") + " ago";
  }
  D.ago = ago;

  D.createSessions = function createSessions({ list, api, currentId, onRenamed }) {
    const sessions = new Map(); // id -> { id, title, shown_title, agent_name, updated_at }
    const rows = new Map();

    function shownTitle(session) {
      return session.title || session.shown_title || UNTITLED;
    }

    function buildRow(id) {
      const parts = {};
      parts.title = el("span", { class: "session-title" });
      parts.meta = el("span", { class: "session-meta" });
      parts.link = el("a", { class: "session-link", href: "/sessions/" + id + "/" }, parts.title, parts.meta);
      parts.rename = el("button", { type: "button", class: "icon-btn session-rename", onclick: () => startRename(id) }, icon("edit"));
      parts.remove = el("a", { class: "icon-btn session-delete", href: "/sessions/" + id + "/delete/" }, icon("trash"));
      parts.li = el("li", { class: "session-item", dataset: { sessionId: String(id) } }, parts.link, parts.rename, parts.remove);
      return parts;
    }

    function patch(id) {
      const session = sessions.get(id);
      const row = rows.get(id);
      const name = shownTitle(session);
      const current = id === currentId;
      row.li.classList.toggle("is-current", current);
      row.title.textContent = name;
      row.title.classList.toggle("untitled", !session.title && !session.shown_title);
      row.meta.textContent = (session.agent_name ? session.agent_name + " · " : "") + ago(session.updated_at);
      if (current) row.link.setAttribute("aria-current", "page");
      else row.link.removeAttribute("aria-current");
      row.rename.setAttribute("aria-label", "Rename “" + name + "”");
      row.rename.title = "Rename";
      row.remove.setAttribute("aria-label", "Delete “" + name + "”");
      row.remove.title = "Delete permanently";
    }

    function order() {
      const sorted = [...sessions.values()].sort((a, b) => Date.parse(b.updated_at) - Date.parse(a.updated_at) || b.id - a.id);
      sorted.forEach((session, index) => {
        const li = rows.get(session.id).li;
        if (list.children[index] !== li) list.insertBefore(li, list.children[index] || null);
      });
    }

    function upsert(payload) {
      const known = sessions.get(payload.id);
      sessions.set(payload.id, { ...known, ...payload });
      if (!rows.has(payload.id)) rows.set(payload.id, buildRow(payload.id));
      patch(payload.id);
    }

    function remove(id) {
      rows.get(id)?.li.remove();
      rows.delete(id);
      sessions.delete(id);
    }

    function startRename(id) {
      const row = rows.get(id);
      const session = sessions.get(id);
      const input = el("input", { class: "session-rename-input", value: session.title || "", maxlength: "200", "aria-label": "New title for “" + shownTitle(session) + "” (empty: automatic)", placeholder: shownTitle(session) });
      let done = false;
      const finish = async (save) => {
        if (done) return;
        done = true;
        const title = input.value.trim();
        input.replaceWith(row.link);
        row.rename.hidden = false;
        row.remove.hidden = false;
        row.rename.focus();
        if (!save || title === (session.title || "")) return;
        try {
          const saved = await api.patch("/agents-api/sessions/" + id + "/", { title });
          upsert({ id, title: saved.title });
          D.announce("Renamed to “" + shownTitle(sessions.get(id)) + "”");
          if (onRenamed) onRenamed(id, sessions.get(id));
        } catch (err) {
          D.toast("Could not rename: " + err.message);
        }
      };
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          finish(true);
        } else if (event.key === "Escape") {
          event.preventDefault();
          event.stopPropagation();
          finish(false);
        }
      });
      input.addEventListener("blur", () => finish(true));
      row.link.replaceWith(input);
      row.rename.hidden = true;
      row.remove.hidden = true;
      input.focus();
      input.select();
    }

    return {
      load(payloads) {
        for (const payload of payloads) upsert(payload);
        order();
        // A long list opens scrolled to the current session.
        rows.get(currentId)?.li.scrollIntoView({ block: "nearest" });
      },
      /** Read the list again (another tab may have started, renamed or deleted one). */
      async refresh() {
        const fresh = D.results(await api.get("/agents-api/sessions/"));
        const seen = new Set(fresh.map((session) => session.id));
        for (const id of [...sessions.keys()]) if (!seen.has(id)) remove(id);
        for (const session of fresh) upsert({ id: session.id, title: session.title, agent_name: session.agent_name, updated_at: session.updated_at });
        order();
      },
      /** The current session changed: a message (moves it up) or its automatic title. */
      touch(fields) {
        if (!sessions.has(currentId)) return;
        upsert({ id: currentId, ...fields });
        order();
      },
      title: (id) => (sessions.has(id) ? shownTitle(sessions.get(id)) : UNTITLED),
      get: (id) => sessions.get(id),
      tick() {
        for (const id of sessions.keys()) patch(id);
      },
    };
  };
})(window);
