/*
 * The Facts panel: the durable facts of this (agent, user) scope, always in context word
 * for word; edit, delete (after a confirmation) and add. Each says who set it and when,
 * and links to the topic of the turn that set it ("Why do you remember this?").
 */
import { el, icon, toast, announce } from "./util.js";
import { url } from "./config.js";
import { empty } from "./inspector.js";
import { topicLinker } from "./panel-consolidation.js";

// `f` is the panel's state (factsPanel): the API, the session, the list, its callbacks.

const showValue = (value) => (typeof value === "string" ? value : JSON.stringify(value));

function render(f, data) {
  const facts = data.facts || {};
  const provenance = data.provenance || {};
  const keys = Object.keys(facts).sort((a, b) => a.localeCompare(b));
  if (!keys.length) return [empty("No durable facts yet. Add one below, or tell " + f.agentName + ": /remember favourite colour = teal")];
  f.list.replaceChildren(...keys.map((key) => row(f, key, facts[key], provenance[key])));
  return [f.list];
}

/** Who set it, when, and from which topic; a fact older than provenance says nothing. */
function source(f, origin) {
  if (!origin) return null;
  const words = "Set by " + (f.BY[origin.actor] || origin.actor) + ", " + new Date(origin.set_at).toLocaleString();
  return el("div", { class: "fact-source" }, words, ...(origin.topic ? [" · from ", f.link(origin.topic)] : []));
}

function row(f, key, value, origin) {
  const li = el("li", { class: "fact", dataset: { key } });
  const view = () => {
    li.replaceChildren(
      el(
        "div",
        { class: "fact-row" },
        el("div", { class: "fact-text" }, el("div", { class: "fact-key", text: key }), el("div", { class: "fact-value", text: showValue(value) }), source(f, origin)),
        el(
          "div",
          { class: "fact-actions" },
          el("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": "Edit fact " + key, title: "Edit", onclick: () => edit(f, li, key, value, view) }, icon("edit")),
          el("button", { type: "button", class: "btn btn-quiet btn-small btn-danger", "aria-label": "Delete fact " + key, title: "Delete", onclick: () => confirmDelete(f, li, key, view) }, icon("trash"))
        )
      )
    );
  };
  view();
  return li;
}

function edit(f, li, key, value, view) {
  const input = el("textarea", { "aria-label": "Value of " + key, rows: "2" });
  input.value = showValue(value);
  const error = el("p", { class: "form-error", role: "alert", hidden: true });
  const form = el(
    "form",
    { onsubmit: (event) => save(f, event, { key, value, input, error }) },
    el("div", { class: "fact-key", text: key }),
    input,
    error,
    el("div", { class: "form-row" }, el("button", { type: "button", class: "btn btn-small", onclick: view }, "Cancel"), el("button", { type: "submit", class: "btn btn-primary btn-small" }, "Save"))
  );
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") view();
    if (event.key === "Enter" && !event.shiftKey && event.target === input) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  li.replaceChildren(form);
  input.focus();
  input.select();
}

async function save(f, event, { key, value, input, error }) {
  event.preventDefault();
  // A value that was not text stays JSON when the edit still parses as JSON.
  let next = input.value;
  if (typeof value !== "string") {
    try {
      next = JSON.parse(input.value);
    } catch (err) {
      next = input.value;
    }
  }
  try {
    const data = await f.api.put(f.factUrl(key), { value: next });
    f.show(render(f, data));
    announce("Fact " + key + " saved");
    f.list.querySelector('.fact[data-key="' + CSS.escape(key) + '"] button')?.focus();
  } catch (err) {
    error.textContent = err.message;
    error.hidden = false;
  }
}

function confirmDelete(f, li, key, view) {
  const keep = el("button", { type: "button", class: "btn btn-small", onclick: () => { view(); li.querySelector("button").focus(); } }, "Keep");
  const remove = el("button", { type: "button", class: "btn btn-small btn-danger", onclick: () => deleteFact(f, key) }, "Delete");
  li.replaceChildren(el("div", { class: "fact-row" }, el("div", { class: "fact-text" }, el("div", { class: "fact-key", text: key }), el("div", { class: "fact-value", text: "Delete this fact?" })), el("div", { class: "fact-actions" }, keep, remove)));
  remove.focus();
}

async function deleteFact(f, key) {
  try {
    await f.api.del(f.factUrl(key));
    announce("Fact " + key + " deleted");
    f.reload();
  } catch (err) {
    toast("Could not delete the fact: " + err.message);
  }
}

function listenToAddForm(f) {
  const addForm = document.getElementById("fact-add");
  addForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = addForm.elements.key.value.trim();
    const value = addForm.elements.value.value;
    const error = document.getElementById("fact-add-error");
    error.hidden = true;
    try {
      const data = await f.api.put(f.factUrl(key), { value });
      addForm.reset();
      f.show(render(f, data));
      announce("Fact " + key + " saved");
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    }
  });
}

export function factsPanel({ api, sessionId, agentName, onOpenTopic, show, reload }) {
  const f = {
    api,
    agentName,
    show,
    reload,
    factUrl: (key) => url("sessionFact", { session_id: sessionId, key }),
    list: el("ul", { class: "fact-list" }),
    link: topicLinker({ sessionId, onOpenTopic }),
    BY: { user: "you", agent: agentName, import: "an import", consolidator: "consolidation" },
  };
  listenToAddForm(f);

  async function load() {
    const data = await api.get(url("sessionFacts", { session_id: sessionId }));
    return render(f, data);
  }

  return { load };
}
