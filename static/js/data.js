/*
 * Your data: Import reads the chosen file in the page, says what it holds, and sends it to
 * the REST import (the server checks it whole: a bad file changes nothing); then says what
 * was added. Export is a plain download link, served as a JSON file by the server.
 */
import { url } from "./config.js";
import { createApi, el } from "./util.js";

const api = createApi();
const form = document.getElementById("import-form");
const $ = (id) => document.getElementById(id);
let documentToImport = null;

const plural = (n, one, many) => n.toLocaleString("en") + " " + (n === 1 ? one : many);

function describe(doc) {
  const sessions = Array.isArray(doc.sessions) ? doc.sessions : [];
  const topics = sessions.flatMap((session) => (Array.isArray(session.topics) ? session.topics : []));
  const messages = topics.reduce((sum, topic) => sum + (Array.isArray(topic.messages) ? topic.messages.length : 0), 0);
  const facts = doc.facts && typeof doc.facts === "object" ? Object.keys(doc.facts).length : 0;
  return [
    "This file holds " + plural(facts, "fact", "facts") + ", " + plural(sessions.length, "session", "sessions") + ", " + plural(topics.length, "topic", "topics") + " and " + plural(messages, "message", "messages") + (doc.agent ? " of " + doc.agent : "") + ".",
    "Import adds what is not here yet and updates the topics that changed; nothing is removed, and a fact set here after the file was exported keeps its value.",
  ];
}

function showPreview(lines, problem = false) {
  const preview = $("import-preview");
  preview.replaceChildren(...lines.map((line) => el("p", { text: line })));
  preview.classList.toggle("is-problem", problem);
  preview.hidden = false;
}

function factsLine(report) {
  const keys = (list) => (list.length ? " (" + list.join(", ") + ")" : "");
  const [added, changed, skipped] = [report.facts_added || [], report.facts_changed || [], report.facts_skipped || []];
  return "Facts: " + added.length + " added" + keys(added) + ", " + changed.length + " changed" + keys(changed) + ", " + skipped.length + " skipped, newer here" + keys(skipped) + ".";
}

function result(report) {
  const added = report.sessions_created + report.topics_created + report.messages_created;
  const facts = (report.facts_added || []).length + (report.facts_changed || []).length;
  if (!added && !report.topics_updated && !facts) return "Imported: nothing changed, everything in the file was already here. " + factsLine(report);
  return "Imported: " + plural(report.sessions_created, "session", "sessions") + ", " + plural(report.topics_created, "topic", "topics") + " and " + plural(report.messages_created, "message", "messages") + " added; " + plural(report.topics_updated, "topic", "topics") + " updated. " + factsLine(report);
}

if (form) {
  $("import-file").addEventListener("change", async () => {
    documentToImport = null;
    $("import-go").disabled = true;
    $("import-result").hidden = true;
    const file = $("import-file").files[0];
    if (!file) return;
    let doc;
    try {
      doc = JSON.parse(await file.text());
    } catch (err) {
      showPreview(["“" + file.name + "” is not a JSON file, so it cannot be imported. Choose a file exported from Driftless."], true);
      return;
    }
    if (!doc || typeof doc !== "object" || Array.isArray(doc)) {
      showPreview(["“" + file.name + "” is JSON but not a Driftless export."], true);
      return;
    }
    try {  // the server's own check: the preview refuses what the import would refuse
      await api.post(url("memoryImport", {}, { agent: $("import-agent").value, check: "1" }), doc);
    } catch (err) {
      showPreview(["“" + file.name + "” cannot be imported: " + err.message], true);
      return;
    }
    documentToImport = doc;
    showPreview(describe(doc));
    $("import-go").disabled = false;
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!documentToImport) return;
    const button = $("import-go");
    const out = $("import-result");
    button.disabled = true;
    try {
      const report = await api.post(url("memoryImport", {}, { agent: $("import-agent").value }), documentToImport);
      out.textContent = result(report);
      out.classList.remove("is-problem");
    } catch (err) {
      out.textContent = "Not imported (nothing was changed): " + err.message;
      out.classList.add("is-problem");
      button.disabled = false;
    }
    out.hidden = false;
  });
}
