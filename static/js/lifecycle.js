/*
 * Session lifecycle triggers (spec: "Session lifecycle triggers", "The debounce mechanism").
 *
 * Leaving a session fires a burst of events (tab hidden, socket closed, page left). All
 * three go through ONE 2000 ms trailing-edge debounced function that POSTs the session's
 * evaluate URL (from the server's config), so a burst costs one evaluation. A hasEvaluated
 * guard then suppresses further calls for the active topic until the user sends a
 * message or the active topic changes: an unchanged topic is not evaluated twice.
 *
 * The request uses fetch with keepalive, so it survives the page unloading, and it is
 * fire-and-forget: it never throws and never blocks the user's exit.
 */
export const EXIT_DEBOUNCE_MS = 2000;

export function debounce(fn, wait) {
  let timer = null;
  const run = () => {
    timer = null;
    fn();
  };
  return {
    schedule() {
      clearTimeout(timer);
      timer = setTimeout(run, wait);
    },
    flush() {
      if (timer !== null) {
        clearTimeout(timer);
        run();
      }
    },
    pending: () => timer !== null,
  };
}

export function createEvaluator({ url, csrfToken, wait = EXIT_DEBOUNCE_MS }) {
  let hasEvaluated = false;

  function evaluateNow() {
    if (hasEvaluated) return;
    hasEvaluated = true;
    try {
      fetch(url, {
        method: "POST",
        keepalive: true,
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken, "Content-Type": "application/json" },
        body: "{}",
      }).catch(() => {});
    } catch (err) {
      // Best effort: an evaluation that could not be sent must not disturb the user.
    }
  }

  const debounced = debounce(evaluateNow, wait);

  return {
    /** An exit trigger fired: evaluate once the burst has been quiet for `wait` ms. */
    trigger() {
      if (!hasEvaluated) debounced.schedule();
    },
    /** The page is going away: send now what would have been sent after the debounce. */
    leave() {
      if (hasEvaluated) return;
      debounced.schedule();
      debounced.flush();
    },
    /** The user sent a message or the active topic changed: the topic is worth a look again. */
    reset() {
      hasEvaluated = false;
    },
    get hasEvaluated() {
      return hasEvaluated;
    },
    get pending() {
      return debounced.pending();
    },
  };
}

/** Wire the page's exit triggers to one evaluator; the socket calls `trigger` itself. */
export function installExitTriggers(evaluator) {
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") evaluator.trigger();
  });
  window.addEventListener("pagehide", () => evaluator.leave());
  // In-app navigation away from the chat page: a same-origin link or a form that posts
  // somewhere else (log out). Links opening a new tab do not leave the page.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || link.target === "_blank") return;
    const to = new URL(link.href, location.href);
    if (to.origin === location.origin && to.pathname !== location.pathname) evaluator.leave();
  });
  document.addEventListener("submit", (event) => {
    if (!event.defaultPrevented && event.target.hasAttribute("action")) evaluator.leave();
  });
}
