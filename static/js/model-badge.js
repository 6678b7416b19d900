/*
 * The model badge under the composer (templates/chat/_model_badge.html, rendered by the
 * server on the page and by GET/PUT of the session's model URL, chat/api/model_choice.py):
 *
 * - while make run prepares the local model (the area's data-lane is "preparing"), the page
 *   asks the server again every few seconds and puts its badge in place: the progress
 *   ("Preparing the local model: building, 3 of 4 steps"), then the model once it is
 *   ready, with no reload;
 * - where the operator lets users pick several models, the picker sets this session's model
 *   (its next message is answered by it); a refused pick says why and the badge keeps the
 *   session's model.
 */
import { url } from "./config.js";

const POLL_MS = 3000;

/** Wire the badge of session `sessionId`; `onChanged` runs after the user picked a model. */
export function createModelBadge({ api, sessionId, toast, onChanged }) {
  const modelUrl = url("sessionModel", { session_id: sessionId });
  let timer = null;
  const area = () => document.getElementById("model-area");

  function show(answer) {
    const old = area();
    if (!old) return;
    const holder = document.createElement("div");
    holder.innerHTML = answer.badge.trim(); // the site's own template, escaped by Django
    const fresh = holder.firstElementChild;
    const wasOpen = old.querySelector("details")?.open;
    if (wasOpen && fresh.querySelector("details")) fresh.querySelector("details").open = true;
    old.replaceWith(fresh);
    watch();
  }

  async function poll() {
    timer = null;
    try {
      show(await api.get(modelUrl));
    } catch (err) {
      watch(); // the server restarting, a dropped connection: ask again later
    }
  }

  /** Ask again while the local model is being prepared (and the page is seen). */
  function watch() {
    clearTimeout(timer);
    timer = null;
    if (area()?.dataset.lane === "preparing") timer = setTimeout(poll, POLL_MS);
  }

  async function pick(select) {
    const before = select.dataset.choice ?? ""; // the session's pick, as the server said
    select.disabled = true;
    try {
      show(await api.put(modelUrl, { choice: select.value }));
      onChanged?.();
    } catch (err) {
      select.value = before;
      toast("The model was not changed: " + err.message);
    } finally {
      select.disabled = false;
    }
  }

  document.addEventListener("change", (event) => {
    if (event.target.id === "model-choice") pick(event.target);
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && area()?.dataset.lane === "preparing") poll();
  });
  watch();
  return { refresh: poll };
}
