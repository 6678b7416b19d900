/*
 * Showing a reply: the page parses no Markdown. A stored reply arrives rendered and
 * sanitized by the server (`content_html`, memory/text/markdown.py: markdown-it-py, Pygments
 * and the nh3 sanitizer); while a reply streams, its text is shown as text, in paragraphs
 * and code blocks built node by node with textContent, until the stored reply replaces it.
 *
 * Either way one message can never break the page: a rendering that fails falls back to
 * the message's plain text, and nothing here recurses.
 */
import { el, icon, copyText, announce } from "./util.js";

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;

/** Put a code block's Copy button in place (each <pre> of a rendered reply gets one). */
function addCopyButtons(node) {
  for (const pre of node.querySelectorAll("pre")) {
    if (pre.parentElement && pre.parentElement.classList.contains("code-block")) continue;
    const language = (pre.querySelector("code")?.className.match(/language-([\w+#.-]+)/) || [])[1] || "";
    const button = el(
      "button",
      {
        type: "button",
        class: "btn btn-quiet btn-small code-copy",
        "aria-label": "Copy the code" + (language ? " (" + language + ")" : ""),
        title: "Copy the code",
        onclick: async () => {
          const ok = await copyText(pre.textContent);
          button.lastChild.textContent = ok ? "Copied" : "Copy failed";
          announce(ok ? "Code copied." : "Could not copy the code.");
          setTimeout(() => (button.lastChild.textContent = "Copy"), 1500);
        },
      },
      icon("copy"),
      el("span", { text: "Copy" })
    );
    const head = el("div", { class: "code-head" }, el("span", { class: "code-lang", text: language }), button);
    const block = el("div", { class: "code-block" });
    pre.replaceWith(block);
    block.append(head, pre);
  }
}

/** A stored message: the server's sanitized HTML, or its text if that cannot be shown. */
export function showRendered(node, html, text) {
  try {
    if (!html) throw new Error("no rendering");
    node.innerHTML = html;
    addCopyButtons(node);
  } catch (err) {
    showPlain(node, text);
  }
}

/** The text as it is, line breaks kept. */
export function showPlain(node, text) {
  node.replaceChildren(el("p", { class: "md-plain", text: String(text || "") }));
}

/**
 * Text still streaming: paragraphs, and fenced code blocks (an unclosed fence runs to the
 * end), all as text. A line-by-line loop: no depth, no recursion, no HTML.
 */
export function showStreaming(node, text) {
  const parts = [];
  let paragraph = [];
  let code = null;
  const endParagraph = () => {
    if (paragraph.length) parts.push(el("p", { class: "md-plain", text: paragraph.join("\n") }));
    paragraph = [];
  };
  for (const line of String(text).split("\n")) {
    if (code !== null) {
      if (FENCE.test(line)) {
        parts.push(el("pre", {}, el("code", { text: code.join("\n") })));
        code = null;
      } else {
        code.push(line);
      }
    } else if (FENCE.test(line)) {
      endParagraph();
      code = [];
    } else if (!line.trim()) {
      endParagraph();
    } else {
      paragraph.push(line);
    }
  }
  endParagraph();
  if (code !== null) parts.push(el("pre", {}, el("code", { text: code.join("\n") })));
  node.replaceChildren(...parts);
}
