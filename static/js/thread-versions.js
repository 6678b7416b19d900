/*
 * Versions of a message, browsable `< 2/3 >`: a reply's earlier versions (Regenerate) and
 * a question's (Edit), from the message's stored `versions` (oldest first). The latest is
 * the message itself, the only one in the model's context; an earlier one shown says so.
 * Content goes in through the caller's `show` (the server's HTML, or text).
 */
import { el } from "./util.js";

/** The `< n/N >` pager, or null for a message with one version. `show(version, latest)`. */
export function versionPager(message, show) {
  const earlier = Array.isArray(message.versions) ? message.versions : [];
  if (!earlier.length) return null;
  const all = [...earlier, { content: message.content, content_html: message.content_html, stopped: message.stopped }];
  let index = all.length - 1;
  const label = el("span", { class: "versions-label", "aria-live": "polite" });
  const note = el("span", { class: "versions-note", text: "An earlier version: not in the context", hidden: true });
  const step = (by) => {
    index = Math.min(all.length - 1, Math.max(0, index + by));
    const latest = index === all.length - 1;
    label.textContent = index + 1 + "/" + all.length;
    previous.disabled = index === 0;
    next.disabled = latest;
    note.hidden = latest;
    show(all[index], latest);
  };
  const previous = el("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": "Previous version", text: "<", onclick: () => step(-1) });
  const next = el("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": "Next version", text: ">", onclick: () => step(1) });
  label.textContent = all.length + "/" + all.length;
  previous.disabled = false;
  next.disabled = true;
  return el("div", { class: "versions", role: "group", "aria-label": "Versions" }, previous, label, next, note);
}
