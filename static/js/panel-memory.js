/*
 * The Memory panel: what the agent carries into every session with this user (promoted
 * topics in full, deprecated ones by title), the budget it fills, and what the budget
 * dropped. Each entry has its brain (teal → red → gray, as in the topic list; a gray one
 * leaves the panel), Edit (title and summary) and a link to its topic.
 *
 * "Why do you remember this?": each entry says where it came from (its topic and chat,
 * who put it in memory and when), what consolidation did to it ("merged from 3 topics",
 * "superseded by …", linked), and an entry the budget leaves out is marked "not in the
 * prompt (over budget)". Below them, the recent consolidation runs with Undo
 * (panel-consolidation.js).
 */
import { el, icon, toast, announce } from "./util.js";
import { url } from "./config.js";
import { topicEditor } from "./topics.js";
import { empty, number, section } from "./inspector.js";
import { consolidated, consolidationSection, topicLinker } from "./panel-consolidation.js";

const NEXT = { promoted: "deprecated", deprecated: "none" };
const STATE_TEXT = {
  promoted: "In memory: remembered in every session. Press to mark it as no longer true.",
  deprecated: "Marked as no longer true: remembered by its title only, so it is not brought back. Press to take it out of memory.",
};

// `m` is the panel's state (memoryPanel): the API, the session and agent, the callbacks,
// the topic linker and who put an entry in memory (m.BY).

const when = (iso) => new Date(iso).toLocaleString();

/** "Why do you remember this?": its topic, who put it there and when, the run that changed it. */
function why(m, entry) {
  const here = entry.session_id === m.sessionId ? " of this chat" : " of another chat";
  const verb = entry.deprecated ? "Marked no longer true by " : "Put in memory by ";
  return el(
    "details",
    { class: "mem-why" },
    el("summary", { text: "Why do you remember this?" }),
    el(
      "ul",
      {},
      el("li", {}, "From the topic ", m.link(entry), here + (entry.days ? ", " + entry.days : "")),
      entry.decided_by ? el("li", { text: verb + (m.BY[entry.decided_by] || entry.decided_by) + ", " + when(entry.decided_at) }) : null,
      entry.consolidation ? el("li", {}, "Changed by ", el("a", { href: "#consolidation-run-" + entry.consolidation, text: "consolidation #" + entry.consolidation })) : null
    )
  );
}

function openLink(m, entry) {
  return el(
    "a",
    {
      href: url("chatPage", { session_id: entry.session_id }) + "#topic-" + entry.topic_id, // as search links
      "aria-label": "Open the topic “" + entry.title + "”",
      onclick: (event) => {
        if (entry.session_id !== m.sessionId || !m.onOpenTopic) return; // another session: follow the link
        event.preventDefault();
        m.onOpenTopic(entry.topic_id);
      },
    },
    "Open topic"
  );
}

function entryTitle(m, entry, inPrompt) {
  return el(
    "div",
    { class: "mem-title" },
    el(
      "span",
      {},
      entry.shown_title,
      " ",
      entry.session_id === m.sessionId ? el("span", { class: "badge", text: "this session" }) : null,
      inPrompt ? null : el("span", { class: "badge badge-out", title: "The memory budget leaves it out: the model does not read it", text: "not in the prompt (over budget)" })
    ),
    el("span", { class: "mem-tokens", title: "Approximate tokens this entry takes in every prompt", text: number(entry.tokens) + " tok" })
  );
}

/** One memory entry, from this session or another: its brain, an edit action, a link. */
function item(m, entry, { inPrompt = true } = {}) {
  const state = entry.deprecated ? "deprecated" : "promoted";
  const li = el("li", { class: "mem-item" + (entry.deprecated ? " is-deprecated" : ""), dataset: { topicId: String(entry.topic_id) } });
  const brain = el(
    "button",
    { type: "button", class: "brain", "aria-label": "Memory: " + entry.title, title: STATE_TEXT[state], dataset: { state }, onclick: () => cycle(m, entry, state, brain) },
    icon("brain", "brain-icon")
  );
  const open = openLink(m, entry);
  const view = () => {
    const actions = el(
      "div",
      { class: "mem-actions" },
      brain,
      el("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": "Edit “" + entry.title + "”", onclick: () => edit(m, entry, li, view) }, icon("edit"), "Edit"),
      open
    );
    li.replaceChildren(...[entryTitle(m, entry, inPrompt), entry.summary ? el("p", { text: entry.summary }) : null, ...consolidated(entry, m.link), why(m, entry), actions].filter(Boolean));
  };
  view();
  return li;
}

async function cycle(m, entry, state, brain) {
  const next = NEXT[state];
  brain.setAttribute("aria-busy", "true");
  try {
    const payload = await m.api.put(url("topicMemory", { topic_id: entry.topic_id }), { state: next });
    if (m.onTopicChanged) m.onTopicChanged(payload, entry.session_id);
    announce("“" + entry.title + "”: " + (next === "none" ? "taken out of memory" : "marked as no longer true"));
    m.reload();
  } catch (err) {
    brain.removeAttribute("aria-busy");
    toast("Could not change the memory of “" + entry.title + "”: " + err.message);
  }
}

async function edit(m, entry, li, view) {
  let topic;
  try {
    topic = await m.api.get(url("topic", { topic_id: entry.topic_id })); // a deprecated entry shows no summary
  } catch (err) {
    toast("Could not open “" + entry.title + "” for editing: " + err.message);
    return;
  }
  li.replaceChildren(
    topicEditor({
      api: m.api,
      topic,
      onSaved: (payload) => {
        if (m.onTopicChanged) m.onTopicChanged(payload, entry.session_id);
        announce("“" + payload.title + "” saved");
        m.reload();
      },
      onCancel: view,
    })
  );
}

/** The memory budget: how much of it the entries fill. */
function meter(used, budget) {
  const share = budget ? Math.min(100, Math.round((100 * used) / budget)) : 0;
  return el(
    "div",
    { class: "meter" },
    el(
      "div",
      { class: "meter-bar", role: "meter", "aria-label": "Memory space used", "aria-valuemin": "0", "aria-valuemax": String(budget), "aria-valuenow": String(used), "aria-valuetext": number(used) + " of " + number(budget) + " tokens" },
      el("div", { class: "meter-fill" + (share >= 100 ? " full" : ""), style: "width: " + share + "%" })
    ),
    el("div", { class: "meter-label", title: "The agent's memory token budget" }, el("span", { text: number(used) + " of " + number(budget) + " tokens" }), el("span", { text: share + "% full" }))
  );
}

/** The entries: remembered, no longer true, left out for want of room. */
function entrySections(m, view) {
  const entries = view.entries || [];
  const promoted = entries.filter((entry) => !entry.deprecated);
  const deprecated = entries.filter((entry) => entry.deprecated);
  const nodes = [];
  nodes.push(section("Remembered", promoted.length, promoted.length ? el("ul", { class: "mem-list" }, promoted.map((entry) => item(m, entry))) : empty("Nothing remembered in full.")));
  if (deprecated.length) nodes.push(section("No longer true", deprecated.length, el("ul", { class: "mem-list" }, deprecated.map((entry) => item(m, entry)))));
  const dropped = view.dropped || [];
  if (dropped.length) {
    nodes.push(
      section(
        "Left out: no room",
        dropped.length,
        el("p", { class: "panel-intro", text: "The oldest first: these no longer fit in the memory budget and are not sent." }),
        el("ul", { class: "mem-list" }, dropped.map((entry) => item(m, entry, { inPrompt: false })))
      )
    );
  }
  return nodes;
}

async function load(m) {
  const [data, runs] = await Promise.all([
    m.api.get(url("sessionMemory", { session_id: m.sessionId })),
    m.api.get(url("memoryConsolidations", {}, { agent: m.agentId })).catch((err) => err),
  ]);
  const tidying = runs instanceof Error
    ? section("Tidying up", null, empty("Could not load the consolidation runs: " + runs.message))
    : consolidationSection({ api: m.api, agentId: m.agentId, runs, link: m.link, reload: m.reload });
  const view = data.scope || data;
  const entries = view.entries || [];
  const used = view.used !== undefined ? view.used : entries.reduce((sum, entry) => sum + entry.tokens, 0);
  const nodes = [section("Space used", null, meter(used, view.budget || 0))];
  if (!entries.length && !(view.dropped || []).length) {
    nodes.push(empty("Nothing in memory yet. Press a topic's brain icon to keep it, or let " + m.agentName + " keep what matters when it sums a topic up."));
    if (!(runs instanceof Error) && runs.length) nodes.push(tidying);
    return nodes;
  }
  nodes.push(...entrySections(m, view));
  nodes.push(tidying);
  if (entries.some((entry) => entry.session_id === m.sessionId)) {
    nodes.push(el("p", { class: "panel-intro panel-note", text: "Topics of this session already reach it as its earlier topics; every other session gets them from memory." }));
  }
  return nodes;
}

export function memoryPanel({ api, sessionId, agentId, agentName, onTopicChanged, onOpenTopic, reload }) {
  const m = {
    api,
    sessionId,
    agentId,
    agentName,
    onTopicChanged,
    onOpenTopic,
    reload,
    link: topicLinker({ sessionId, onOpenTopic }),
    BY: { user: "you", agent: agentName, summarizer: "the summarizer, when the topic was summed up", consolidator: "consolidation" },
  };
  return { load: () => load(m) };
}
