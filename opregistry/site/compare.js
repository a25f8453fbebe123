// Any two releases compared in the page, from data/ops.js (window.OPREGISTRY_OPS), with
// the rules of `opregistry diff A B` (registry/diff.py: compare): the diff pages of each
// release against the one before it are that function's output, and the tests check
// that this page agrees with them.
"use strict";
(function () {
  const D = window.OPREGISTRY_OPS;
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => "&#" + c.charCodeAt(0) + ";");
  const names = Object.keys(D.ops).sort();  // code point order, as Python's sorted()
  // own keys only: an op or release named "constructor" is not Object.prototype's
  const own = (o, k) => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined);

  function diff(a, b) {
    const out = { added: [], removed: [], gradient: [], effective: [], inputs: [],
                  second: [], verification: [], functions: [], xla: [], xlaGradient: [],
                  variants: [] };
    for (const name of names) {
      const old = own(D.ops[name].releases, a), now = own(D.ops[name].releases, b);
      if (!old && now) out.added.push(name);
      if (old && !now) out.removed.push(name);
      if (!old || !now) continue;
      if (old.gradient !== now.gradient) out.gradient.push([name, old.gradient, now.gradient]);
      else if (old.function && now.function && old.function.source_hash &&
               now.function.source_hash && old.function.source_hash !== now.function.source_hash) {
        out.functions.push([name, old.function, now.function]);
      }
      if (old.effective && now.effective && old.effective !== now.effective) {
        out.effective.push([name, old.effective, now.effective]);
      }
      const before = new Map((old.inputs || []).map((i) => [i.position, i]));
      for (const i of now.inputs || []) {
        const j = before.get(i.position);
        if (j && j.name === i.name && j.result !== i.result) out.inputs.push([name, i.name, j.result, i.result]);
      }
      if (old.second_order && now.second_order && old.second_order !== now.second_order) {
        out.second.push([name, old.second_order, now.second_order]);
      }
      if (old.verification && now.verification && old.verification.status !== now.verification.status) {
        out.verification.push([name, old.verification.status, now.verification.status]);
      }
      if (old.xla && now.xla) {  // both harvested with XLA; a setting compiled in both
        if (old.xla.forward !== now.xla.forward) out.xla.push([name, old.xla.forward, now.xla.forward]);
        if (old.xla.gradient !== now.xla.gradient) out.xlaGradient.push([name, old.xla.gradient, now.xla.gradient]);
        const was = new Map((old.xla.variants || []).map((v) => [v.setting, v]));
        for (const v of now.xla.variants || []) {
          const w = was.get(v.setting);
          for (const part of w ? ["forward", "gradient"] : []) {
            if (w[part] !== v[part]) out.variants.push([name, v.setting, part, w[part], v[part]]);
          }
        }
      }
    }
    return out;
  }

  const link = (name, key) => `<a href="${esc(own(D.ops, name).page)}#r-${esc(key)}"><code>${esc(name)}</code></a>`;
  const source = (f) => `<code>${esc(f.qualname || "")}</code>` + (f.url ? ` <a href="${esc(f.url)}" rel="noopener">source</a>` : "");

  function section(title, rows, headers) {
    const slug = title.toLowerCase().replace(/ /g, "-");
    let content = '<p class="dim">none</p>';
    if (rows.length && headers) {
      content = '<div class="scroll"><table><thead><tr>' + headers.map((h) => `<th scope="col">${h}</th>`).join("") +
                "</tr></thead><tbody>" + rows.map((r) => "<tr><th scope=row>" + r[0] + "</th>" +
                r.slice(1).map((c) => `<td>${c}</td>`).join("") + "</tr>").join("") + "</tbody></table></div>";
    } else if (rows.length) {
      content = '<p class="oplist">' + rows.join(" ") + "</p>";
    }
    return `<section data-count="${rows.length}"><h2 id="${slug}">${esc(title)} <span class="dim">(${rows.length})</span></h2>${content}</section>`;
  }

  function show() {
    const a = $("a").value, b = $("b").value, d = diff(a, b);
    const pairs = (rows, key) => rows.map((t) => [link(t[0], key), esc(t[1]), esc(t[2])]);
    const total = Object.values(d).reduce((n, rows) => n + rows.length, 0);
    $("summary").textContent = `${a} → ${b}: ${total} changes`;
    $("result").innerHTML =
      section("Added", d.added.map((n) => link(n, b))) +
      section("Removed", d.removed.map((n) => link(n, a))) +
      section("Gradient", pairs(d.gradient, b), ["op", "before", "after"]) +
      section("Effective", pairs(d.effective, b), ["op", "before", "after"]) +
      section("Per-input", d.inputs.map((t) => [link(t[0], b), esc(t[1]), esc(t[2]), esc(t[3])]), ["op", "input", "before", "after"]) +
      section("Second order", pairs(d.second, b), ["op", "before", "after"]) +
      section("Verification", pairs(d.verification, b), ["op", "before", "after"]) +
      section("Gradient function changed", d.functions.map((t) => [link(t[0], b), source(t[1]), source(t[2])]), ["op", "before", "after"]) +
      section("Under XLA", pairs(d.xla, b), ["op", "before", "after"]) +
      section("Gradient under XLA", pairs(d.xlaGradient, b), ["op", "before", "after"]) +
      section("Under XLA per setting", d.variants.map((t) => [link(t[0], b), `<code>${esc(t[1])}</code>`, esc(t[2]), esc(t[3]), esc(t[4])]), ["op", "setting", "part", "before", "after"]);
    try { history.replaceState(null, "", `#a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`); } catch (e) { /* some hosts forbid it */ }
    document.documentElement.dataset.ready = "1";
  }

  function load() {
    const found = new URLSearchParams(location.hash.slice(1));
    const keys = D.releases.map((r) => r.key);
    const main = D.releases.filter((r) => r.library === D.releases[0].library).map((r) => r.key);
    $("a").value = keys.includes(found.get("a")) ? found.get("a") : main[Math.max(0, main.length - 2)];
    $("b").value = keys.includes(found.get("b")) ? found.get("b") : main[main.length - 1];
    show();
  }
  $("a").addEventListener("change", show);
  $("b").addEventListener("change", show);
  window.addEventListener("hashchange", load);
  load();
})();
