/*
 * A tool call in the thread: a compact <details> whose summary says what it did in the
 * server's sentence and which expands to the call and its result (JSON). Payloads go in
 * through textContent only.
 */
import { el, icon } from "./util.js";

function parseJson(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch (err) {
    return undefined;
  }
}

function pretty(value) {
  const parsed = parseJson(value);
  if (parsed === undefined) return String(value == null ? "" : value);
  return typeof parsed === "string" ? parsed : JSON.stringify(parsed, null, 2);
}

const asObject = (value) => {
  const parsed = parseJson(value);
  return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
};

/** A tool call: what it is doing; the call and its result (JSON) behind a disclosure. */
export function toolChip(call, chips) {
  const fn = call.function || {};
  const name = fn.name || call.name || "tool";
  const args = fn.arguments !== undefined ? fn.arguments : call.arguments;
  const sentence = el("span", { class: "tool-brief", text: "Using " + name + "…" });
  const status = el("span", { class: "tool-status", text: "running" });
  const result = el("pre");
  const resultBox = el("div", { hidden: true }, el("h4", { text: "Result" }), result);
  const node = el(
    "details",
    { class: "tool" },
    el("summary", {}, icon("chevron-right", "chev"), sentence, status),
    el("div", { class: "tool-detail" }, el("h4", { text: "Call: " + name }), el("pre", { text: pretty(args || "{}") }), resultBox)
  );
  if (call.id) chips.set(call.id, { name, args, sentence, status, result, resultBox });
  return node;
}

export function showResult(chip, message) {
  const content = message.content;
  chip.sentence.textContent = message.tool_sentence;
  const failed = "error" in asObject(content);
  chip.status.textContent = failed ? "failed" : "done";
  chip.status.classList.add(failed ? "failed" : "done");
  chip.result.textContent = pretty(content);
  chip.resultBox.hidden = false;
}

/** A result whose call is in another topic (a fork moved it) or on an earlier page. */
export function resultAlone(message, chips) {
  const node = toolChip({ id: "", name: message.tool_name || "tool", arguments: "" }, chips);
  const alone = { name: message.tool_name || "tool", args: "", sentence: node.querySelector(".tool-brief"), status: node.querySelector(".tool-status"), result: el("pre"), resultBox: el("div") };
  node.querySelector(".tool-detail").replaceChildren(el("h4", { text: "Result" }), alone.result);
  showResult(alone, message);
  return node;
}
