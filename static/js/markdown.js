/*
 * A small, safe Markdown renderer for chat messages.
 *
 * Safety comes from the order of work: the whole text is HTML-escaped first, and only
 * then are a few tags added around pieces of that escaped text (paragraphs, line breaks,
 * code blocks, inline code, bold, italics, strikethrough, headings, quotes, lists, rules,
 * tables and links). No character of the message can ever become markup, and a link is only
 * made for an http(s) address, so `javascript:` and friends stay plain text.
 *
 * It also copes with text that is still streaming: an unclosed code fence renders as a
 * code block to the end, an unclosed `**` stays literal.
 */
(function (global) {
  "use strict";

  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
  }

  // Placeholders keep finished inline HTML (code spans, links) away from later rules.
  // U+0000 cannot survive in the escaped text because we strip it from the input.
  const SLOT = "\u0000";
  // An address ends at whitespace or at an escaped <, >, " or ' (the escape-first order
  // means those characters arrive here as entities).
  const URL_BODY = "(?:(?!&(?:lt|gt|quot|#39);)[^\\s\\u0000])+";
  const LINK = new RegExp("\\[([^\\]\\n]+)\\]\\((https?:\\/\\/" + URL_BODY.replace("[^\\s", "[^\\s)") + ")\\)", "g");
  const BARE_URL = new RegExp("(^|[\\s(])(https?:\\/\\/" + URL_BODY + ")", "g");
  const TRAILING_PUNCTUATION = /[.,;:!?)\]]+$/;

  function anchor(url, label) {
    return '<a href="' + url + '" target="_blank" rel="noopener noreferrer nofollow">' + label + "</a>";
  }

  function inline(text) {
    const slots = [];
    const stash = (html) => SLOT + (slots.push(html) - 1) + SLOT;
    text = text.replace(/`([^`\n]+)`/g, (_, code) => stash("<code>" + code + "</code>"));
    text = text.replace(LINK, (_, label, url) => stash(anchor(url, emphasis(label))));
    text = text.replace(BARE_URL, (_, lead, url) => {
      const tail = (url.match(TRAILING_PUNCTUATION) || [""])[0];
      const bare = url.slice(0, url.length - tail.length);
      return lead + stash(anchor(bare, bare)) + tail;
    });
    text = emphasis(text);
    return text.replace(new RegExp(SLOT + "(\\d+)" + SLOT, "g"), (_, i) => slots[Number(i)]);
  }

  function emphasis(text) {
    return text
      .replace(/\*\*(?=\S)([^\n]*?\S)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^\w])__(?=\S)([^\n]*?\S)__(?=[^\w]|$)/g, "$1<strong>$2</strong>")
      .replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?=[^*\w]|$)/g, "$1<em>$2</em>")
      .replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?=[^\w]|$)/g, "$1<em>$2</em>")
      .replace(/~~(?=\S)([^\n]*?\S)~~/g, "<del>$1</del>");
  }

  const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
  const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
  const QUOTE = /^\s{0,3}&gt;\s?(.*)$/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  // A table: a header row, then a delimiter row such as |---|:---:|---:|
  const TABLE_DELIMITER = /^\s{0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  function render(source) {
    const text = escapeHtml(String(source == null ? "" : source).replace(/\u0000/g, "").replace(/\r\n?/g, "\n"));
    return blocks(text.split("\n")).join("");
  }

  function blocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (!line.trim()) {
        i += 1;
      } else if ((m = line.match(FENCE))) {
        const close = new RegExp("^\\s{0,3}" + m[1][0] + "{" + m[1].length + ",}\\s*$");
        const code = [];
        i += 1;
        while (i < lines.length && !close.test(lines[i])) code.push(lines[i++]);
        i += 1; // the closing fence (or the end of a reply still streaming)
        const cls = m[2] ? ' class="language-' + m[2] + '"' : "";
        out.push("<pre><code" + cls + ">" + code.join("\n") + "</code></pre>");
      } else if ((m = line.match(HEADING))) {
        const tag = m[1].length <= 2 ? "h3" : "h4";
        out.push("<" + tag + ">" + inline(m[2]) + "</" + tag + ">");
        i += 1;
      } else if (RULE.test(line)) {
        out.push("<hr>");
        i += 1;
      } else if (QUOTE.test(line)) {
        const quoted = [];
        while (i < lines.length && (m = lines[i].match(QUOTE))) {
          quoted.push(m[1]);
          i += 1;
        }
        out.push("<blockquote>" + blocks(quoted).join("") + "</blockquote>");
      } else if (startsTable(lines, i)) {
        const start = i;
        i += 2;
        while (i < lines.length && lines[i].includes("|") && lines[i].trim()) i += 1;
        out.push(table(lines.slice(start, i)));
      } else if (ITEM.test(line)) {
        const start = i;
        while (i < lines.length && (ITEM.test(lines[i]) || (lines[i].trim() && /^\s+/.test(lines[i])))) i += 1;
        out.push(list(lines.slice(start, i)));
      } else {
        const para = [];
        while (i < lines.length && lines[i].trim() && !startsBlock(lines[i]) && !startsTable(lines, i)) para.push(lines[i++].trim());
        out.push("<p>" + para.map(inline).join("<br>") + "</p>");
      }
    }
    return out;
  }

  function startsBlock(line) {
    return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
  }

  function startsTable(lines, i) {
    const next = lines[i + 1];
    return lines[i].includes("|") && next !== undefined && next.includes("-") && TABLE_DELIMITER.test(next) && cells(lines[i]).length === cells(next).length;
  }

  /** The cells of a table row: split on | (not on an escaped \|), outer pipes optional. */
  function cells(row) {
    let text = row.trim();
    if (text.startsWith("|")) text = text.slice(1);
    if (text.endsWith("|") && !text.endsWith("\\|")) text = text.slice(0, -1);
    return text.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
  }

  function table(lines) {
    const aligns = cells(lines[1]).map((spec) => {
      const left = spec.startsWith(":");
      const right = spec.endsWith(":");
      return left && right ? "center" : right ? "right" : left ? "left" : "";
    });
    const row = (line, tag) => {
      const values = cells(line);
      return "<tr>" + aligns.map((align, k) => "<" + tag + (align ? ' class="align-' + align + '"' : "") + ">" + inline(values[k] || "") + "</" + tag + ">").join("") + "</tr>";
    };
    const body = lines.slice(2).map((line) => row(line, "td")).join("");
    return '<div class="table-wrap"><table><thead>' + row(lines[0], "th") + "</thead>" + (body ? "<tbody>" + body + "</tbody>" : "") + "</table></div>";
  }

  // Lists nest by indentation; a line that is not an item continues the item above it.
  function list(lines) {
    const first = lines[0].match(ITEM);
    const base = first[1].length;
    const ordered = /\d/.test(first[2]);
    const isTopItem = (line) => {
      const m = line.match(ITEM);
      return m !== null && m[1].length <= base;
    };
    const items = [];
    let i = 0;
    while (i < lines.length) {
      const m = lines[i].match(ITEM);
      if (isTopItem(lines[i])) {
        items.push({ text: [m[3]], nested: [] });
        i += 1;
      } else if (m) {
        const start = i;
        while (i < lines.length && !isTopItem(lines[i])) i += 1;
        items[items.length - 1].nested.push(list(lines.slice(start, i)));
      } else {
        items[items.length - 1].text.push(lines[i].trim());
        i += 1;
      }
    }
    const tag = ordered ? "ol" : "ul";
    const number = parseInt(first[2], 10);
    const start = ordered && number !== 1 ? ' start="' + number + '"' : "";
    const html = items.map((item) => "<li>" + item.text.map(inline).join("<br>") + item.nested.join("") + "</li>");
    return "<" + tag + start + ">" + html.join("") + "</" + tag + ">";
  }

  global.DriftlessMarkdown = { render, escapeHtml };
})(window);
