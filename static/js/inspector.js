/*
 * The inspector: one tab per panel (WAI-ARIA tabs: arrow keys, Home and End move between
 * them). A panel loads when it is shown and reloads when the chat tells it something
 * changed; a hidden panel only notes that it is stale.
 *
 * A panel is a module (panel-*.js) giving { load(): Promise<Node[]> }; the page's
 * template holds each tab (#tab-<name>), its panel (#panel-<name>) and its body
 * (#<name>-body). Add a panel by adding the three and passing it here.
 */
import { el } from "./util.js";

export function createInspector(panels) {
  const names = Object.keys(panels);
  const bodies = Object.fromEntries(names.map((name) => [name, document.getElementById(name + "-body")]));
  const tabs = Object.fromEntries(names.map((name) => [name, document.getElementById("tab-" + name)]));
  const sections = Object.fromEntries(names.map((name) => [name, document.getElementById("panel-" + name)]));
  const stale = new Set(names);
  const loading = new Map();
  let selected = names[0];

  function select(name, { focus = false } = {}) {
    selected = name;
    for (const other of names) {
      const on = other === name;
      tabs[other].setAttribute("aria-selected", String(on));
      tabs[other].tabIndex = on ? 0 : -1;
      sections[other].hidden = !on;
    }
    if (focus) tabs[name].focus();
    if (stale.has(name)) load(name);
  }

  names.forEach((name, index) => {
    tabs[name].addEventListener("click", () => select(name));
    tabs[name].addEventListener("keydown", (event) => {
      const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: names.length - 1 };
      if (!(event.key in moves)) return;
      event.preventDefault();
      select(names[(moves[event.key] + names.length) % names.length], { focus: true });
    });
  });

  async function load(name) {
    stale.delete(name);
    const body = bodies[name];
    const ticket = {};
    loading.set(name, ticket);
    if (!body.firstChild) body.append(el("p", { class: "panel-loading", text: "Loading…" }));
    try {
      const nodes = await panels[name].load();
      if (loading.get(name) === ticket) body.replaceChildren(...nodes);
    } catch (err) {
      if (loading.get(name) === ticket) body.replaceChildren(el("p", { class: "panel-empty", text: "Could not load this panel: " + err.message }));
    }
  }

  select(selected);
  return {
    select,
    /** Show these nodes in a panel now (an answer that already holds its new state). */
    show(name, nodes) {
      stale.delete(name);
      loading.delete(name);
      bodies[name].replaceChildren(...nodes);
    },
    /** Something behind these panels changed: reload the one shown, mark the others. */
    refresh(...which) {
      for (const name of which) {
        if (!(name in panels)) continue;
        if (name === selected) load(name);
        else stale.add(name);
      }
    },
  };
}

/** The small pieces every panel uses. */
export const number = (n) => Number(n || 0).toLocaleString();
export const humanize = (name) => String(name).replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());
export function empty(text) {
  return el("p", { class: "panel-empty", text });
}
export function section(title, count, ...children) {
  return el("section", { class: "panel-section" }, el("h3", {}, el("span", { text: title }), count === null ? null : el("span", { text: String(count) })), ...children);
}
