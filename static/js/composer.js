/*
 * The composer: the text field, its Send button (Stop while a reply is being written),
 * the character counter, the hint and the status line.
 *
 * The draft is kept (also across reloads, in localStorage) until the server has the
 * message. The cap is shown before it matters: the counter appears once the text is
 * three quarters of the way there, and past the cap Send is off and the counter says by
 * how much. While the socket is down the composer says so, and keeps what you typed.
 */
import { el } from "./util.js";

const COUNTER_FROM = 0.75; // of the cap

export function createComposer({ form, input, sendButton, statusLine, counter, limit, draftKey, onSubmit, onStop, onReconnect }) {
  let state = { open: false, working: false, ended: false };
  const format = (n) => n.toLocaleString("en");

  const saveDraft = () => {
    try {
      if (input.value) localStorage.setItem(draftKey, input.value);
      else localStorage.removeItem(draftKey);
    } catch (err) {
      // Storage may be off (private mode); the draft then lives only in the page.
    }
  };

  function count() {
    const length = [...input.value.trim()].length; // code points, as the server counts
    const over = length > limit;
    counter.hidden = length < limit * COUNTER_FROM;
    counter.classList.toggle("is-over", over);
    counter.textContent = over
      ? format(length - limit) + (length - limit === 1 ? " character" : " characters") + " over the " + format(limit) + " limit"
      : format(length) + " / " + format(limit);
    return { length, over };
  }

  function update() {
    const { length, over } = count();
    const stopping = state.working && state.open && onStop;
    sendButton.classList.toggle("is-stop", Boolean(stopping));
    sendButton.replaceChildren(stopIcon(Boolean(stopping)));
    if (stopping) {
      sendButton.disabled = false;
      sendButton.setAttribute("aria-label", "Stop the reply (Esc)");
      sendButton.title = "Stop the reply (Esc)";
    } else {
      sendButton.disabled = !length || over || state.working || !state.open;
      sendButton.setAttribute("aria-label", !state.open ? "Send message (not connected)" : state.working ? "Send message (wait for the reply)" : "Send message");
      sendButton.title = "";
    }
    form.classList.toggle("is-disconnected", !state.open);
  }

  function stopIcon(stop) {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "icon");
    svg.setAttribute("aria-hidden", "true");
    const use = document.createElementNS("http://www.w3.org/2000/svg", "use");
    use.setAttribute("href", stop ? "#i-stop" : "#i-send");
    svg.append(use);
    return svg;
  }

  function autosize() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, window.innerHeight * 0.3) + "px";
    update();
  }

  function submit() {
    if (state.working && state.open && onStop) {
      onStop();
      return;
    }
    const content = input.value.trim();
    if (!content) return;
    if (!state.open) {
      showStatus(state.ended ? "This session is not available to you any more. Log in again and reload the page." : "Not connected: your message is kept here and can be sent once the connection is back.", !state.ended);
      return;
    }
    if (count().over) {
      showStatus("This message is longer than the " + format(limit) + "-character limit; shorten it or split it in two.");
      return;
    }
    if (state.working) {
      showStatus("Wait for the reply to finish, then send again.");
      return;
    }
    onSubmit(content);
  }

  function showStatus(text, withReconnect = false) {
    statusLine.replaceChildren(document.createTextNode(text));
    if (withReconnect && onReconnect) statusLine.append(el("button", { type: "button", class: "btn btn-small", onclick: onReconnect }, "Reconnect now"));
    statusLine.hidden = false;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", () => {
    saveDraft();
    autosize();
  });

  try {
    input.value = localStorage.getItem(draftKey) || "";
  } catch (err) {
    input.value = "";
  }
  autosize();

  return {
    /** {open, working, ended}: connected, a reply is being written, access ended. */
    set(next) {
      state = { ...state, ...next };
      if (state.open) statusLine.hidden = true;
      update();
    },
    get value() {
      return input.value;
    },
    /** Put text back (a message that never reached the server); never over a new draft. */
    restore(text) {
      if (input.value.trim()) return false;
      input.value = text;
      saveDraft();
      autosize();
      return true;
    },
    clear() {
      input.value = "";
      saveDraft();
      autosize();
    },
    focus: () => input.focus(),
    showStatus,
    hideStatus() {
      statusLine.hidden = true;
    },
  };
}
