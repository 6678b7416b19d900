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

const format = (n) => n.toLocaleString("en");

// `c` is the composer's state (createComposer): its elements, its callbacks and
// c.state = {open, working, ended}.

function saveDraft({ input, draftKey }) {
  try {
    if (input.value) localStorage.setItem(draftKey, input.value);
    else localStorage.removeItem(draftKey);
  } catch (err) {
    // Storage may be off (private mode); the draft then lives only in the page.
  }
}

function count({ input, counter, limit }) {
  const length = [...input.value.trim()].length; // code points, as the server counts
  const over = length > limit;
  counter.hidden = length < limit * COUNTER_FROM;
  counter.classList.toggle("is-over", over);
  counter.textContent = over
    ? format(length - limit) + (length - limit === 1 ? " character" : " characters") + " over the " + format(limit) + " limit"
    : format(length) + " / " + format(limit);
  return { length, over };
}

function update(c) {
  const { sendButton, state } = c;
  const { length, over } = count(c);
  const stopping = state.working && state.open && c.onStop;
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
  c.form.classList.toggle("is-disconnected", !state.open);
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

function autosize(c) {
  c.input.style.height = "auto";
  c.input.style.height = Math.min(c.input.scrollHeight, window.innerHeight * 0.3) + "px";
  update(c);
}

function submit(c) {
  const { state } = c;
  if (state.working && state.open && c.onStop) {
    c.onStop();
    return;
  }
  const content = c.input.value.trim();
  if (!content) return;
  if (!state.open) {
    showStatus(c, state.ended ? "This session is not available to you any more. Log in again and reload the page." : "Not connected: your message is kept here and can be sent once the connection is back.", !state.ended);
    return;
  }
  if (count(c).over) {
    showStatus(c, "This message is longer than the " + format(c.limit) + "-character limit; shorten it or split it in two.");
    return;
  }
  if (state.working) {
    showStatus(c, "Wait for the reply to finish, then send again.");
    return;
  }
  c.onSubmit(content);
}

function showStatus({ statusLine, onReconnect }, text, withReconnect = false) {
  statusLine.replaceChildren(document.createTextNode(text));
  if (withReconnect && onReconnect) statusLine.append(el("button", { type: "button", class: "btn btn-small", onclick: onReconnect }, "Reconnect now"));
  statusLine.hidden = false;
}

function listen(c) {
  c.form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit(c);
  });
  c.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      submit(c);
    }
  });
  c.input.addEventListener("input", () => {
    saveDraft(c);
    autosize(c);
  });
}

export function createComposer({ form, input, sendButton, statusLine, counter, limit, draftKey, onSubmit, onStop, onReconnect }) {
  const c = { form, input, sendButton, statusLine, counter, limit, draftKey, onSubmit, onStop, onReconnect };
  c.state = { open: false, working: false, ended: false };
  listen(c);
  try {
    input.value = localStorage.getItem(draftKey) || "";
  } catch (err) {
    input.value = "";
  }
  autosize(c);

  return {
    /** {open, working, ended}: connected, a reply is being written, access ended. */
    set(next) {
      c.state = { ...c.state, ...next };
      if (c.state.open) statusLine.hidden = true;
      update(c);
    },
    get value() {
      return input.value;
    },
    /** Put text back (a message that never reached the server); never over a new draft. */
    restore(text) {
      if (input.value.trim()) return false;
      input.value = text;
      saveDraft(c);
      autosize(c);
      return true;
    },
    clear() {
      input.value = "";
      saveDraft(c);
      autosize(c);
    },
    focus: () => input.focus(),
    showStatus: (text, withReconnect) => showStatus(c, text, withReconnect),
    hideStatus() {
      statusLine.hidden = true;
    },
  };
}
