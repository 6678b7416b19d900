/*
 * The sessions list (the home page, and beside the chat): rendered once, by the server
 * (templates/chat/_session_items.html), with the words it already has (the session's
 * name, its agent, how long ago). This module only keeps it current and renames:
 *
 * - refresh() reads the list again as the server renders it (sessionNav), when the tab
 *   comes back into view, after a turn, and once a minute ("5 minutes ago" moves on);
 * - Rename is inline: the row's title becomes a text field; Enter saves, Escape cancels,
 *   focus returns to the Rename button. An empty title goes back to the automatic name.
 */
import { el, toast, announce } from "./util.js";
import { url } from "./config.js";

// `s` is the list's state (createSessions): its element, the API, the current session and
// s.renaming (true while a title is being edited).

function row(s, id) {
  return s.list.querySelector('.session-item[data-session-id="' + id + '"]');
}

/** The name the server gives a session ("" when it is not in the list). */
function name(s, id) {
  return row(s, id)?.dataset.name || "";
}

async function refresh(s) {
  const { list } = s;
  if (s.renaming) return; // never under the user's fingers
  const query = s.currentId === null ? null : { current: s.currentId };
  const html = await s.api.html(url("sessionNav", {}, query));
  if (s.renaming) return;
  const focused = document.activeElement && list.contains(document.activeElement) ? focusKey(document.activeElement) : null;
  list.innerHTML = html; // the site's own template, escaped by Django
  if (focused) list.querySelector(focused)?.focus();
  if (s.onChanged) s.onChanged();
}

function focusKey(node) {
  const item = node.closest(".session-item");
  if (!item) return null;
  const part = node.matches(".session-rename") ? ".session-rename" : node.matches(".session-delete") ? ".session-delete" : ".session-link";
  return '.session-item[data-session-id="' + item.dataset.sessionId + '"] ' + part;
}

function startRename(s, item) {
  const id = Number(item.dataset.sessionId);
  const link = item.querySelector(".session-link");
  const renameButton = item.querySelector(".session-rename");
  const removeLink = item.querySelector(".session-delete");
  const shown = item.dataset.name;
  const input = el("input", {
    class: "session-rename-input",
    maxlength: "200",
    "aria-label": "New title for “" + shown + "” (empty: automatic)",
    placeholder: shown,
  });
  input.value = item.dataset.title || "";
  let done = false;
  s.renaming = true;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const title = input.value.trim();
    input.replaceWith(link);
    renameButton.hidden = false;
    removeLink.hidden = false;
    renameButton.focus();
    s.renaming = false;
    if (!save || title === (item.dataset.title || "")) return;
    try {
      await s.api.patch(url("session", { session_id: id }), { title });
      await refresh(s);
      announce("Renamed to “" + name(s, id) + "”");
    } catch (err) {
      toast("Could not rename: " + err.message);
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
  link.replaceWith(input);
  renameButton.hidden = true;
  removeLink.hidden = true;
  input.focus();
  input.select();
}

export function createSessions({ list, api, currentId = null, onChanged = null }) {
  const s = { list, api, currentId, onChanged, renaming: false };
  list.addEventListener("click", (event) => {
    const button = event.target.closest(".session-rename");
    if (button && list.contains(button)) startRename(s, button.closest(".session-item"));
  });
  // A long list opens scrolled to the current session.
  if (currentId !== null) row(s, currentId)?.scrollIntoView({ block: "nearest" });

  return { refresh: () => refresh(s), name: (id) => name(s, id) };
}

/** The home page: the list is live there too (rename; read again when the tab returns). */
export function startSessionsPage({ list, api }) {
  const sessions = createSessions({ list, api });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") sessions.refresh().catch(() => {});
  });
  setInterval(() => {
    if (document.visibilityState === "visible") sessions.refresh().catch(() => {});
  }, 60000);
  return sessions;
}
