/*
 * Small helpers shared by the page's modules: a DOM builder that only ever sets text
 * through textContent, icons from the page's SVG sprite, a JSON API client that sends the
 * CSRF token, a toast and a screen-reader announcer.
 */
import { config } from "./config.js";

const SVG_NS = "http://www.w3.org/2000/svg";

/** el("div", {class: "x", text: "..."}, child, ...): text is set with textContent, never parsed. */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    // Through the CSSOM: the Content-Security-Policy refuses style *attributes*.
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

export function icon(name, className) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("class", className || "icon");
  svg.setAttribute("aria-hidden", "true");
  const use = document.createElementNS(SVG_NS, "use");
  use.setAttribute("href", "#i-" + name);
  svg.append(use);
  return svg;
}

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code || "";
  }
}

function errorText(data, response) {
  if (data && typeof data === "object") {
    if (typeof data.detail === "string") return data.detail;
    const first = Object.entries(data)[0];
    if (first) {
      const [field, problems] = first;
      return field + ": " + (Array.isArray(problems) ? problems.join(" ") : String(problems));
    }
  }
  return "the server answered " + response.status;
}

/** JSON over fetch; rejects with ApiError carrying the server's own message. */
export function createApi(csrfToken = config.csrfToken) {
  async function request(method, url, body) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET") init.headers["X-CSRFToken"] = csrfToken;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = typeof body === "string" ? body : JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      throw new ApiError("the server could not be reached", 0, "unreachable");
    }
    if (response.status === 204) return null;
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    if (!response.ok) throw new ApiError(errorText(data, response), response.status, data && data.code);
    return data;
  }
  return {
    get: (url) => request("GET", url),
    post: (url, body) => request("POST", url, body),
    put: (url, body) => request("PUT", url, body),
    patch: (url, body) => request("PATCH", url, body),
    del: (url) => request("DELETE", url),
    /** A server-rendered fragment of one of the site's own pages (HTML, escaped by Django). */
    async html(url) {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok) throw new ApiError("the server answered " + response.status, response.status);
      return response.text();
    },
  };
}

let toastTimer = null;

/**
 * A short message at the bottom of the screen; also read by screen readers (role=status).
 * `action` ({label, run}) adds a button (Undo); the toast then stays a little longer.
 */
export function toast(message, action = null) {
  const node = document.getElementById("toast");
  if (!node) return;
  node.replaceChildren(el("span", { text: message }));
  if (action) {
    node.append(
      el("button", { type: "button", class: "btn btn-small", onclick: () => { node.hidden = true; action.run(); } }, action.label)
    );
  }
  node.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    node.hidden = true;
  }, action ? 8000 : 4500);
}

/** Tell screen-reader users about a change they did not cause by focus (a new topic, ...). */
export function announce(message) {
  const node = document.getElementById("announcer");
  if (!node) return;
  node.textContent = "";
  setTimeout(() => {
    node.textContent = message;
  }, 30);
}

/** Lists from the REST API may be plain arrays or DRF pages. */
export const results = (data) => (Array.isArray(data) ? data : (data && data.results) || []);

/** Put text on the clipboard; falls back to a hidden textarea where the API is refused. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (err) {
    const area = el("textarea", { class: "visually-hidden", "aria-hidden": "true" });
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (err2) {
      ok = false;
    }
    area.remove();
    return ok;
  }
}
