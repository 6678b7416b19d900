/*
 * The Notes panel: the agent's scratchpad for the topic shown (archived when it closes),
 * as the server renders its Markdown.
 */
import { el } from "./util.js";
import { url } from "./config.js";
import { showRendered } from "./render.js";
import { empty } from "./inspector.js";

export function notesPanel({ api, agentName, topicForNotes, topicTitle }) {
  async function load() {
    const topicId = topicForNotes();
    const data = await api.get(url("topicNotes", { topic_id: topicId }));
    const head = el("h3", { class: "ctx-layer", text: "Notes of “" + topicTitle(topicId) + "”" + (data.archived ? " (archived)" : "") });
    if (!data.content || !data.content.trim()) {
      return [head, empty("No notes for this topic yet. " + agentName + " writes here as it works; you can ask it: /note we chose PostgreSQL")];
    }
    const body = el("div", { class: "md notes-body" });
    showRendered(body, data.content_html, data.content);
    return [head, body];
  }
  return { load };
}
