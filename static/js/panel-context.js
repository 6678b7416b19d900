/*
 * The Context panel: what the agent works from, part by part, in plain words; the precise
 * term of each part (docs/memory.md) is its tooltip. Stable parts come first, so the
 * provider's prompt cache keeps hitting. What it remembers of you links each entry to
 * its topic and says what consolidation made of it, as the memory panel does; the
 * entries the budget leaves out are listed as not in the prompt.
 */
import { el } from "./util.js";
import { url } from "./config.js";
import { empty, humanize, number, section } from "./inspector.js";
import { consolidated, topicLinker } from "./panel-consolidation.js";

// name -> [plain words, the precise term and what it means]
const LAYERS = {
  stable: ["The same every turn", "Stable prefix: byte-identical from turn to turn, so the provider's prompt cache serves it"],
  semi_stable: ["Changes with the topic", "Semi-stable prefix: the topic's notes and this chat's earlier topics"],
  volatile: ["This turn", "Volatile suffix: the conversation window and the turn's working memory"],
};
const PARTS = {
  soul: ["Who the agent is", "SOUL identity"],
  skills: ["What it is good at", "Skills"],
  tools: ["The tools it may use", "Tools"],
  persistent_memory: ["What it remembers of you", "Persistent memory: the topics in memory, from every session"],
  durable_facts: ["Facts you keep", "Durable facts"],
  drift_result: ["A change of topic", "Drift result"],
  notes: ["This topic's notes", "Notes"],
  prior_topics: ["Earlier topics of this chat", "Earlier topics"],
  thread: ["The conversation so far", "Conversation window"],
  tool_results: ["Tool results", "Tool results"],
  working_memory: ["Notes for this turn", "Working memory"],
};

// The model's profile (memory/llm/profiles.py) and the shape of the next turn: whether
// the request carries the tools, and why.
function shapeNote(data) {
  const profile = data.profile;
  const shape = data.shape;
  if (!profile || !shape) return null;
  const facts = [
    "context " + number(profile.context_tokens) + " tokens",
    profile.tools_reliable ? "calls tools reliably" : "calls tools poorly",
    profile.json_schema ? "honours JSON schemas" : "no JSON schemas",
  ].join(", ");
  return el(
    "p",
    { class: "ctx-profile", title: "The model's profile: " + profile.family + " (DRIFTLESS_MODEL_PROFILE overrides it)" },
    el("b", { text: profile.model + " · " + profile.kind }),
    el("span", { text: " (" + facts + "). Next turn: " + (shape.lean ? "lean, no tools" : "with tools") + ": " + shape.reason + "." })
  );
}

export function contextPanel({ api, sessionId, onOpenTopic }) {
  const link = topicLinker({ sessionId, onOpenTopic });
  const source = (entry, ...extra) => el("li", {}, link(entry), ...extra, ...consolidated(entry, link));

  async function load() {
    const data = await api.get(url("sessionContext", { session_id: sessionId }));
    const cache = data.cache || {};
    const ratio = cache.hit_rate;
    const cacheText = cache.prompt_tokens
      ? number(cache.cached_tokens) + " of " + number(cache.prompt_tokens) + " tokens reused from the provider's cache"
      : "reused from the provider's cache (none reported yet)";
    const stats = el(
      "div",
      { class: "ctx-summary" },
      el("div", { class: "stat", title: "Approximate tokens of everything sent to the model" }, el("b", { text: number(data.tokens) }), el("span", { text: "tokens sent (about)" })),
      el("div", { class: "stat", title: "Prompt cache hit rate" }, el("b", { text: ratio === null || ratio === undefined ? "–" : Math.round(ratio * 100) + "%" }), el("span", { text: cacheText }))
    );
    const nodes = [stats, shapeNote(data)];
    const sources = data.memory_sources || { kept: [], dropped: [] };
    const span = data.window;
    if (span) {
      nodes.push(el("p", { class: "ctx-window", text: "The conversation so far: the last " + number(span.kept) + " of this topic's " + number(span.topic_messages) + " messages; " + span.policy + "." }));
    }
    for (const layer of data.layers || []) {
      const [words, term] = LAYERS[layer.name] || [humanize(layer.name), layer.name];
      nodes.push(el("h3", { class: "ctx-layer", title: term }, el("span", { text: words }), el("span", { class: "tok", text: " · " + number(layer.tokens) + " tok" })));
      const parts = (layer.parts || []).filter((part) => part.text);
      if (!parts.length) nodes.push(empty("Empty this turn."));
      for (const part of parts) {
        const [partWords, partTerm] = PARTS[part.name] || [humanize(part.name), part.name];
        nodes.push(
          el(
            "details",
            { class: "ctx-block" },
            el("summary", { title: partTerm }, el("span", { text: partWords }), el("span", { class: "tok", text: number(part.tokens) + " tok" })),
            el("pre", { text: part.text }),
            part.name === "persistent_memory" && sources.kept.length ? el("ul", { class: "ctx-sources", "aria-label": "Where each record comes from" }, sources.kept.map((entry) => source(entry))) : null
          )
        );
      }
    }
    if (sources.dropped.length) {
      const out = el("span", { class: "badge badge-out", text: "not in the prompt (over budget)" });
      nodes.push(section("Left out of memory: no room", sources.dropped.length, el("ul", { class: "dropped-list" }, sources.dropped.map((entry) => source(entry, " ", out.cloneNode(true))))));
    }
    if ((data.dropped_earlier_topics || []).length) {
      nodes.push(section("Earlier topics left out: no room", data.dropped_earlier_topics.length, el("ul", { class: "dropped-list" }, data.dropped_earlier_topics.map((title) => el("li", { text: title })))));
    }
    return nodes;
  }
  return { load };
}
