// Elements by hand. Every string from the server goes into the DOM as text (textContent, attribute
// values through setAttribute), never as markup: a reason or a tenant name cannot become a script.

/** h("td", { class: "num" }, "12"). Strings and numbers become text nodes. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    // Through the CSSOM: the page's content security policy refuses inline style attributes.
    else if (k === "style") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Fills a definition list from [term, value, id?] pairs. */
export function facts(dl, pairs) {
  dl.replaceChildren(...pairs.flatMap(([k, v, id]) => [h("dt", {}, k), h("dd", id ? { id } : {}, v)]));
}

/** A link to a run's page, its id in monospace. */
export function runLink(id) {
  return h("a", { href: `#/runs/${encodeURIComponent(id)}`, class: "mono" }, id);
}
