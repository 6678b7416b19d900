/*
 * The memory panel's consolidation part: the scope's recent runs, each with what it did
 * ("Merged “A” into “B”", "Superseded “Lisbon” by “Porto”", what it refused and why), an
 * Undo button while the run can be undone, and "Consolidate now". A refused undo or run
 * shows the server's own message and changes nothing on the page.
 *
 * Titles are the user's stored text and the model's: always set as text (el()).
 */
import { el, announce } from "./util.js";
import { url } from "./config.js";
import { empty, section } from "./inspector.js";

const RUNS_SHOWN = 5;

/** A link to a topic ({topic_id, session_id, title}); one deleted since is its title. */
export function topicLinker({ sessionId, onOpenTopic }) {
  return function link(ref) {
    const title = "“" + (ref.title || "#" + ref.topic_id) + "”";
    if (ref.session_id === null || ref.session_id === undefined) return el("span", { text: title + " (deleted)" });
    return el("a", {
      href: url("chatPage", { session_id: ref.session_id }) + "#topic-" + ref.topic_id,
      class: "topic-link",
      text: title,
      onclick: (event) => {
        if (ref.session_id !== sessionId || !onOpenTopic) return; // another session: follow the link
        event.preventDefault();
        onOpenTopic(ref.topic_id);
      },
    });
  };
}

/** "“A”, “B” and “C”" as nodes. */
function listed(nodes) {
  return nodes.flatMap((node, index) => (index === 0 ? [node] : [index === nodes.length - 1 ? " and " : ", ", node]));
}

/** What consolidation made of an entry ("merged from 3 topics: …", "superseded by …"). */
export function consolidated(entry, link) {
  const merged = entry.merged_from || [];
  const others = merged.filter((ref) => ref.topic_id !== entry.topic_id).map(link);
  return [
    merged.length > 1 ? el("p", { class: "mem-source" }, "merged from " + merged.length + " topics: ", ...listed(others), merged.length > others.length ? " and this one" : "") : null,
    entry.superseded_by ? el("p", { class: "mem-source" }, "superseded by ", link(entry.superseded_by)) : null,
  ];
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");

export function consolidationSection({ api, agentId, runs, link, reload }) {
  const status = el("p", { class: "run-status", role: "status" });
  const now = el("button", { type: "button", class: "btn btn-small", onclick: consolidateNow }, "Consolidate now");

  async function consolidateNow() {
    now.disabled = true;
    status.textContent = "Consolidating…";
    try {
      const run = await api.post(url("memoryConsolidate", {}, { agent: agentId }));
      announce("Consolidation #" + run.id + ": " + run.status_text);
      reload();
    } catch (err) {
      status.textContent = "Not consolidated: " + err.message;
      now.disabled = false;
    }
  }

  function operation(op) {
    const words = {
      merge: () => [
        "Merged ", ...listed(op.sources.map(link)), ...(op.into ? [" into ", link(op.into)] : []),
        ...(op.by === "rules" ? [" (near-duplicates, by their words)"] : []),
      ],
      supersede: () => ["Superseded ", link(op.old), " by ", link(op.new)],
      fact: () => op.outdated
        ? ["Marked the fact “" + op.key + "” outdated"]
        : ["Set the fact “" + op.key + "” to “" + op.value + "”"],
      unusable: () => ["Could not use “" + op.proposed + "”"],
    }[op.op]();
    if (op.applied) return el("li", {}, ...words);
    return el("li", { class: "is-refused" }, "Refused: ", ...words, el("span", { class: "run-reason", text: " (" + op.reason + ")" }));
  }

  function item(run) {
    const error = el("p", { class: "form-error", role: "alert", hidden: true });
    const undo = el("button", { type: "button", class: "btn btn-small", "aria-label": "Undo consolidation #" + run.id, onclick: doUndo }, "Undo");
    async function doUndo() {
      undo.disabled = true;
      error.hidden = true;
      try {
        await api.post(url("memoryConsolidationUndo", { run_id: run.id }));
        announce("Consolidation #" + run.id + " undone: memory is as it was before it");
        reload();
      } catch (err) {
        error.textContent = "Not undone: " + err.message;
        error.hidden = false;
        undo.disabled = false;
      }
    }
    const ops = run.operations || [];
    return el(
      "li",
      { class: "run", id: "consolidation-run-" + run.id, dataset: { runId: String(run.id), status: run.status } },
      el("div", { class: "run-head" }, el("span", { class: "run-title", text: "Consolidation #" + run.id }), el("span", { class: "run-status-text", text: run.status_text })),
      el("p", { class: "run-meta", text: when(run.created_at) + " · " + run.trigger_text + (run.undone_at ? " · undone " + when(run.undone_at) : "") }),
      ops.length ? el("ul", { class: "run-ops" }, ops.map(operation)) : null,
      run.detail ? el("p", { class: "run-detail", text: run.detail }) : null,
      run.undoable ? el("div", { class: "form-row" }, undo) : null,
      error
    );
  }

  const shown = (runs || []).slice(0, RUNS_SHOWN);
  return section(
    "Tidying up",
    null,
    el("p", { class: "panel-intro", text: "Consolidation merges entries that repeat one subject and marks a reversed decision as no longer true. It never changes an entry you chose or wrote. Every run can be undone." }),
    el("div", { class: "form-row run-now" }, now),
    status,
    shown.length ? el("ul", { class: "run-list" }, shown.map(item)) : empty("No consolidation yet.")
  );
}
