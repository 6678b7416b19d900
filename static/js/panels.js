/*
 * The inspector: Memory, Facts, Notes and Context tabs (WAI-ARIA tabs: arrow keys, Home
 * and End move between them). A panel loads when it is shown and reloads when the chat
 * tells it something changed; a hidden panel only notes that it is stale.
 */
(function (global) {
  "use strict";
  const D = global.Driftless;
  const { el, icon } = D;
  const md = global.DriftlessMarkdown;
  const TABS = ["memory", "facts", "notes", "context"];
  const LAYER_NAMES = { stable: "Stable prefix", semi_stable: "Semi-stable prefix", volatile: "Volatile suffix" };
  const PART_NAMES = {
    soul: "SOUL identity",
    skills: "Skills",
    tools: "Tools",
    persistent_memory: "Persistent memory",
    durable_facts: "Durable facts",
    drift_result: "Drift result",
    notes: "Notes",
    prior_topics: "Earlier topics",
    thread: "Conversation window",
    tool_results: "Tool results",
    working_memory: "Working memory",
  };
  const number = (n) => Number(n || 0).toLocaleString();
  const humanize = (name) => String(name).replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());

  function empty(text) {
    return el("p", { class: "panel-empty", text });
  }

  function section(title, count, ...children) {
    return el("section", { class: "panel-section" }, el("h3", {}, el("span", { text: title }), count === null ? null : el("span", { text: String(count) })), ...children);
  }

  // The brain in the memory panel: an entry is promoted or deprecated; a press moves it on
  // as in the topic list (teal → red → gray), and a gray one leaves the panel.
  const MEM_NEXT = { promoted: "deprecated", deprecated: "none" };
  const MEM_STATE_TEXT = {
    promoted: "Promoted: remembered in every session. Press to deprecate it.",
    deprecated: "Deprecated: remembered as reversed, title only. Press to take it out of memory.",
  };

  D.createInspector = function createInspector({ api, sessionId, agentName, topicForNotes, topicTitle, onTopicChanged, onOpenTopic }) {
    const bodies = Object.fromEntries(TABS.map((name) => [name, document.getElementById(name + "-body")]));
    const tabs = Object.fromEntries(TABS.map((name) => [name, document.getElementById("tab-" + name)]));
    const panels = Object.fromEntries(TABS.map((name) => [name, document.getElementById("panel-" + name)]));
    const stale = new Set(TABS);
    const loading = new Map();
    let selected = "memory";

    function select(name, { focus = false } = {}) {
      selected = name;
      for (const other of TABS) {
        const on = other === name;
        tabs[other].setAttribute("aria-selected", String(on));
        tabs[other].tabIndex = on ? 0 : -1;
        panels[other].hidden = !on;
      }
      if (focus) tabs[name].focus();
      if (stale.has(name)) load(name);
    }

    TABS.forEach((name, index) => {
      tabs[name].addEventListener("click", () => select(name));
      tabs[name].addEventListener("keydown", (event) => {
        const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: TABS.length - 1 };
        if (!(event.key in moves)) return;
        event.preventDefault();
        select(TABS[(moves[event.key] + TABS.length) % TABS.length], { focus: true });
      });
    });

    async function load(name) {
      stale.delete(name);
      const body = bodies[name];
      const ticket = {};
      loading.set(name, ticket);
      if (!body.firstChild) body.append(el("p", { class: "panel-loading", text: "Loading…" }));
      try {
        const nodes = await LOADERS[name]();
        if (loading.get(name) === ticket) body.replaceChildren(...nodes);
      } catch (err) {
        if (loading.get(name) === ticket) body.replaceChildren(empty("Could not load this panel: " + err.message));
      }
    }

    // --- Memory -------------------------------------------------------------------------

    /** One memory entry, from this session or another: its brain, an edit action, a link. */
    function memItem(entry) {
      const state = entry.deprecated ? "deprecated" : "promoted";
      const topicUrl = "/sessions/" + entry.session_id + "/#topic-" + entry.topic_id; // as search links
      const li = el("li", { class: "mem-item" + (entry.deprecated ? " is-deprecated" : ""), dataset: { topicId: String(entry.topic_id) } });
      const brain = el(
        "button",
        { type: "button", class: "brain", "aria-label": "Memory: " + entry.title, title: MEM_STATE_TEXT[state], dataset: { state }, onclick: cycle },
        icon("brain", "brain-icon")
      );
      const open = el(
        "a",
        {
          href: topicUrl,
          "aria-label": "Open the topic “" + entry.title + "”",
          onclick: (event) => {
            if (entry.session_id !== sessionId || !onOpenTopic) return; // another session: follow the link
            event.preventDefault();
            onOpenTopic(entry.topic_id);
          },
        },
        "Open topic"
      );
      const view = () => {
        const title = el(
          "div",
          { class: "mem-title" },
          el("span", {}, (entry.deprecated ? "[DEPRECATED] " : "") + entry.title, " ", entry.session_id === sessionId ? el("span", { class: "badge", text: "this session" }) : null),
          el("span", { class: "mem-tokens", text: number(entry.tokens) + " tok" })
        );
        const actions = el(
          "div",
          { class: "mem-actions" },
          brain,
          el("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": "Edit “" + entry.title + "”", onclick: edit }, icon("edit"), "Edit"),
          open
        );
        li.replaceChildren(...[title, entry.summary ? el("p", { text: entry.summary }) : null, actions].filter(Boolean));
      };
      async function cycle() {
        const next = MEM_NEXT[state];
        brain.setAttribute("aria-busy", "true");
        try {
          const payload = await api.put("/agents-api/topics/" + entry.topic_id + "/memory", { state: next });
          if (onTopicChanged) onTopicChanged(payload, entry.session_id);
          D.announce("“" + entry.title + "”: " + (next === "none" ? "taken out of memory" : next));
          load("memory");
        } catch (err) {
          brain.removeAttribute("aria-busy");
          D.toast("Could not change the memory of “" + entry.title + "”: " + err.message);
        }
      }
      async function edit() {
        let topic;
        try {
          topic = await api.get("/agents-api/topics/" + entry.topic_id); // a deprecated entry shows no summary
        } catch (err) {
          D.toast("Could not open “" + entry.title + "” for editing: " + err.message);
          return;
        }
        li.replaceChildren(
          D.topicEditor({
            api,
            topic,
            onSaved: (payload) => {
              if (onTopicChanged) onTopicChanged(payload, entry.session_id);
              D.announce("“" + payload.title + "” saved");
              load("memory");
            },
            onCancel: view,
          })
        );
      }
      view();
      return li;
    }

    async function loadMemory() {
      const data = await api.get("/agents-api/sessions/" + sessionId + "/memory");
      const view = data.scope || data;
      const entries = view.entries || [];
      const promoted = entries.filter((entry) => !entry.deprecated);
      const deprecated = entries.filter((entry) => entry.deprecated);
      const used = view.used !== undefined ? view.used : entries.reduce((sum, entry) => sum + entry.tokens, 0);
      const budget = view.budget || 0;
      const share = budget ? Math.min(100, Math.round((100 * used) / budget)) : 0;
      const meter = el(
        "div",
        { class: "meter" },
        el(
          "div",
          { class: "meter-bar", role: "meter", "aria-label": "Memory budget used", "aria-valuemin": "0", "aria-valuemax": String(budget), "aria-valuenow": String(used), "aria-valuetext": number(used) + " of " + number(budget) + " tokens" },
          el("div", { class: "meter-fill" + (share >= 100 ? " full" : ""), style: "width: " + share + "%" })
        ),
        el("div", { class: "meter-label" }, el("span", { text: number(used) + " of " + number(budget) + " tokens" }), el("span", { text: share + "% full" }))
      );
      const nodes = [section("Budget", null, meter)];
      if (!entries.length && !(view.dropped || []).length) {
        nodes.push(empty("Nothing in memory yet. Press a topic's brain icon to promote it, or let " + agentName + " promote what matters when it summarizes a topic."));
        return nodes;
      }
      nodes.push(section("Promoted", promoted.length, promoted.length ? el("ul", { class: "mem-list" }, promoted.map(memItem)) : empty("No promoted topics.")));
      if (deprecated.length) {
        nodes.push(section("Deprecated", deprecated.length, el("ul", { class: "mem-list" }, deprecated.map(memItem))));
      }
      const dropped = view.dropped || [];
      if (dropped.length) {
        nodes.push(
          section(
            "Dropped by the budget",
            dropped.length,
            el("p", { class: "panel-intro", text: "Oldest first: these no longer fit and are not sent." }),
            el("ul", { class: "mem-list" }, dropped.map(memItem))
          )
        );
      }
      if (entries.some((entry) => entry.session_id === sessionId)) {
        nodes.push(el("p", { class: "panel-intro", style: "margin-top: 1rem", text: "Topics of this session already reach it as its earlier topics; every other session gets them from this block." }));
      }
      return nodes;
    }

    // --- Facts --------------------------------------------------------------------------

    const factUrl = (key) => "/agents-api/sessions/" + sessionId + "/facts/" + encodeURIComponent(key);
    const showValue = (value) => (typeof value === "string" ? value : JSON.stringify(value));
    const factsList = el("ul", { class: "fact-list" });

    function renderFacts(facts) {
      const keys = Object.keys(facts).sort((a, b) => a.localeCompare(b));
      if (!keys.length) return [empty("No durable facts yet. Add one below, or tell " + agentName + ": /remember favourite colour = teal")];
      factsList.replaceChildren(...keys.map((key) => factRow(key, facts[key])));
      return [factsList];
    }

    function factRow(key, value) {
      const li = el("li", { class: "fact", dataset: { key } });
      const view = () => {
        li.replaceChildren(
          el(
            "div",
            { class: "fact-row" },
            el("div", { class: "fact-text" }, el("div", { class: "fact-key", text: key }), el("div", { class: "fact-value", text: showValue(value) })),
            el(
              "div",
              { class: "fact-actions" },
              el("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": "Edit fact " + key, title: "Edit", onclick: edit }, icon("edit")),
              el("button", { type: "button", class: "btn btn-quiet btn-small btn-danger", "aria-label": "Delete fact " + key, title: "Delete", onclick: confirmDelete }, icon("trash"))
            )
          )
        );
      };
      const edit = () => {
        const input = el("textarea", { "aria-label": "Value of " + key, rows: "2" });
        input.value = showValue(value);
        const error = el("p", { class: "form-error", role: "alert", hidden: true });
        const form = el(
          "form",
          { onsubmit: save },
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
        async function save(event) {
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
            const data = await api.put(factUrl(key), { value: next });
            bodies.facts.replaceChildren(...renderFacts(data.facts));
            D.announce("Fact " + key + " saved");
            bodies.facts.querySelector('.fact[data-key="' + CSS.escape(key) + '"] button')?.focus();
          } catch (err) {
            error.textContent = err.message;
            error.hidden = false;
          }
        }
      };
      const confirmDelete = () => {
        const keep = el("button", { type: "button", class: "btn btn-small", onclick: () => { view(); li.querySelector("button").focus(); } }, "Keep");
        const remove = el("button", { type: "button", class: "btn btn-small btn-danger", onclick: doDelete }, "Delete");
        li.replaceChildren(el("div", { class: "fact-row" }, el("div", { class: "fact-text" }, el("div", { class: "fact-key", text: key }), el("div", { class: "fact-value", text: "Delete this fact?" })), el("div", { class: "fact-actions" }, keep, remove)));
        remove.focus();
      };
      const doDelete = async () => {
        try {
          await api.del(factUrl(key));
          D.announce("Fact " + key + " deleted");
          load("facts");
        } catch (err) {
          D.toast("Could not delete the fact: " + err.message);
        }
      };
      view();
      return li;
    }

    const addForm = document.getElementById("fact-add");
    addForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const key = addForm.elements.key.value.trim();
      const value = addForm.elements.value.value;
      const error = document.getElementById("fact-add-error");
      error.hidden = true;
      try {
        const data = await api.put(factUrl(key), { value });
        addForm.reset();
        bodies.facts.replaceChildren(...renderFacts(data.facts));
        D.announce("Fact " + key + " saved");
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
      }
    });

    async function loadFacts() {
      const data = await api.get("/agents-api/sessions/" + sessionId + "/facts");
      return renderFacts(data.facts || {});
    }

    // --- Notes --------------------------------------------------------------------------

    async function loadNotes() {
      const topicId = topicForNotes();
      const data = await api.get("/agents-api/topics/" + topicId + "/notes");
      const head = el("h3", { class: "ctx-layer", text: "Notes of “" + topicTitle(topicId) + "”" + (data.archived ? " (archived)" : "") });
      if (!data.content || !data.content.trim()) {
        return [head, empty("No notes for this topic yet. " + agentName + " writes here as it works; you can ask it: /note we chose PostgreSQL")];
      }
      const body = el("div", { class: "md notes-body" });
      body.innerHTML = md.render(data.content);
      return [head, body];
    }

    // --- Context ------------------------------------------------------------------------

    async function loadContext() {
      const data = await api.get("/agents-api/sessions/" + sessionId + "/context");
      const cache = data.cache || {};
      const ratio = cache.hit_rate;
      const cacheText = cache.prompt_tokens
        ? number(cache.cached_tokens) + " of " + number(cache.prompt_tokens) + " prompt tokens served from the provider's cache"
        : "provider cache hits (none reported yet)";
      const stats = el(
        "div",
        { class: "ctx-summary" },
        el("div", { class: "stat" }, el("b", { text: number(data.tokens) }), el("span", { text: "tokens in the stack (approx.)" })),
        el("div", { class: "stat" }, el("b", { text: ratio === null || ratio === undefined ? "–" : Math.round(ratio * 100) + "%" }), el("span", { text: cacheText }))
      );
      const nodes = [stats];
      const span = data.window;
      if (span) {
        nodes.push(
          el("p", { class: "ctx-window", text: "Conversation window: " + number(span.kept) + " of this topic's " + number(span.topic_messages) + " messages; " + span.policy + "." })
        );
      }
      for (const layer of data.layers || []) {
        nodes.push(el("h3", { class: "ctx-layer", text: (LAYER_NAMES[layer.name] || humanize(layer.name)) + " · " + number(layer.tokens) + " tok" }));
        const parts = (layer.parts || []).filter((part) => part.text);
        if (!parts.length) nodes.push(empty("Empty this turn."));
        for (const part of parts) {
          nodes.push(
            el(
              "details",
              { class: "ctx-block" },
              el("summary", {}, el("span", { text: PART_NAMES[part.name] || humanize(part.name) }), el("span", { class: "tok", text: number(part.tokens) + " tok" })),
              el("pre", { text: part.text })
            )
          );
        }
      }
      if ((data.dropped || []).length) {
        nodes.push(section("Dropped from memory by the budget", data.dropped.length, el("ul", { class: "dropped-list" }, data.dropped.map((title) => el("li", { text: title })))));
      }
      if ((data.dropped_earlier_topics || []).length) {
        nodes.push(section("Earlier topics dropped by the budget", data.dropped_earlier_topics.length, el("ul", { class: "dropped-list" }, data.dropped_earlier_topics.map((title) => el("li", { text: title })))));
      }
      return nodes;
    }

    const LOADERS = { memory: loadMemory, facts: loadFacts, notes: loadNotes, context: loadContext };

    select("memory");
    return {
      select,
      /** Something behind these panels changed: reload the one shown, mark the others. */
      refresh(...names) {
        for (const name of names) {
          if (name === selected) load(name);
          else stale.add(name);
        }
      },
    };
  };
})(window);
