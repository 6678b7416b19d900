/*
 * What the server tells the page's scripts (chat/page_config.py): every URL they call, as
 * templates with {placeholders}, the CSRF token and the limits. The scripts write no URL
 * of their own.
 */

function read(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : null;
}

/** The page's configuration (the `driftless-config` JSON the server renders). */
export const config = read("driftless-config") || { urls: {}, csrfToken: "", limits: {} };

/** The page's first state, where it ships one (`driftless-initial`). */
export const initial = read("driftless-initial");

/**
 * A URL by its name: url("topicMessages", { topic_id: 4 }) is that topic's messages URL.
 * Every placeholder must be given; values are URL-encoded (a fact's key may hold "/").
 */
export function url(name, params = {}, query = null) {
  const template = config.urls[name];
  if (template === undefined) throw new Error("no URL named " + name);
  const filled = template.replace(/\{(\w+)\}/g, (_, key) => {
    if (!(key in params)) throw new Error("URL " + name + " needs " + key);
    return encodeURIComponent(String(params[key]));
  });
  if (!query) return filled;
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== null) search.set(key, String(value));
  const text = search.toString();
  return text ? filled + "?" + text : filled;
}
