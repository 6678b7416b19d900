/*
 * The actions on a message: copy on every message; regenerate the last reply; edit and
 * resend the last message of yours. `t` is the thread's state (thread.js).
 */
import { el, icon, copyText, announce } from "./util.js";

/** The final reply shown last and the user message it answers, when they are the topic's last. */
function lastExchange(messages) {
  const last = messages[messages.length - 1];
  const lastUser = [...messages].reverse().find((message) => message.role === "user") || null;
  const reply = last && last.role === "assistant" && !(last.tool_calls || []).length ? last : null;
  return { lastUser, reply };
}

function actionButton(label, name, onclick) {
  return el("button", { type: "button", class: "btn btn-quiet btn-small msg-action", "aria-label": label, title: label, onclick }, icon(name), el("span", { class: "label", text: label.split(" ")[0] }));
}

function flash(button, text) {
  const label = button.querySelector(".label");
  const before = label.textContent;
  label.textContent = text;
  setTimeout(() => (label.textContent = before), 1500);
}

function copyButton(message) {
  const copy = actionButton(message.role === "user" ? "Copy your message" : "Copy the reply", "copy", async () => {
    const ok = await copyText(message.content);
    flash(copy, ok ? "Copied" : "Copy failed");
    announce(ok ? "Copied." : "Could not copy.");
  });
  return copy;
}

/** Copy on every message; Regenerate on the last reply; Edit on your last message. */
export function refreshActions(t) {
  for (const bar of t.root.querySelectorAll(".msg-actions")) bar.remove();
  const { lastUser, reply } = lastExchange(t.messages);
  const open = !t.readOnly && !t.busy;
  for (const message of t.messages) {
    const node = t.rendered.get(message.id);
    // A stopped reply offers Regenerate even when it stopped before its first word.
    if (!node || !node.isConnected || !(message.role === "user" || (message.role === "assistant" && (message.content || message.stopped)))) continue;
    const bar = el("div", { class: "msg-actions" }, ...(message.content ? [copyButton(message)] : []));
    if (open && reply && message === reply && t.onRegenerate) {
      bar.append(actionButton("Regenerate the reply", "retry", () => t.onRegenerate(reply)));
    }
    if (open && lastUser && message === lastUser && t.onEdit) {
      bar.append(actionButton("Edit and resend", "edit", () => startEdit(t, message, node)));
    }
    node.append(bar);
  }
}

function editKeys(input, form, cancel) {
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      cancel();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
}

function startEdit(t, message, node) {
  const bubble = node.querySelector(".bubble");
  const input = el("textarea", { class: "edit-input", "aria-label": "Edit your message", rows: "3" });
  input.value = message.content;
  const cancel = () => {
    form.replaceWith(bubble);
    refreshActions(t);
  };
  const form = el(
    "form",
    { class: "msg-edit", onsubmit: (event) => { event.preventDefault(); const text = input.value.trim(); if (text && text !== message.content) t.onEdit(message, text); else cancel(); } },
    input,
    el("div", { class: "form-row" }, el("button", { type: "button", class: "btn btn-small", onclick: cancel }, "Cancel"), el("button", { type: "submit", class: "btn btn-primary btn-small" }, "Send"))
  );
  editKeys(input, form, cancel);
  node.querySelector(".msg-actions")?.remove();
  bubble.replaceWith(form);
  input.focus();
}
