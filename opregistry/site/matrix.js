// The matrix: every op x every release from data/matrix.js (window.OPREGISTRY_MATRIX).
// Only the rows in view are in the DOM (a fixed row height and two spacer rows), so
// 2,000 ops x 25 releases render, filter and scroll at once.
"use strict";
(function () {
  const M = window.OPREGISTRY_MATRIX;
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => "&#" + c.charCodeAt(0) + ";");
  const releases = M.releases;
  const keyIndex = new Map(releases.map((r, i) => [r.key, i]));
  const stateOf = {}, glyphOf = {};
  for (const state in M.codes) {
    stateOf[M.codes[state]] = state;
    glyphOf[M.codes[state]] = M.states[state].glyph;
  }
  // the name shown beside an op: a plain public one before compat, raw_ops and dunder names
  // the export lists an op's names canonical first (opregistry/registry/names.py)
  const shortName = (names) => names[0] || "";
  // under XLA (issue 25): a second set of codes per op, shown when the view is "xla"
  const xlaStateOf = {}, xlaGlyphOf = {};
  for (const state in M.xla_codes) {
    xlaStateOf[M.xla_codes[state]] = state;
    xlaGlyphOf[M.xla_codes[state]] = M.xla_states[state].glyph;
  }
  const ops = M.ops.map((r) => ({
    name: r[0], codes: r[1], pub: r[2], names: r[3], page: r[4], xla: r[5],
    lname: r[0].toLowerCase(), lnames: r[3].map((n) => n.toLowerCase()), shown: shortName(r[3]),
  }));
  const grid = $("grid"), body = $("rows"), head = $("head");
  const controls = { q: $("q"), pub: $("public"), rel: $("in"), state: $("state"),
                     from: $("from"), to: $("to"), view: $("view") };
  const underXla = () => controls.view.value === "xla";
  const gradientStates = [...controls.state.options].map((o) => [o.value, o.textContent]);
  function setStates() {  // the status filter offers the states of the view shown
    const chosen = controls.state.value;
    const states = underXla() ? [["", "any status"], ...Object.keys(M.xla_codes).map((s) => [s, s])]
                              : gradientStates;
    controls.state.innerHTML = states.map(([v, t]) => `<option value="${esc(v)}">${esc(t)}</option>`).join("");
    controls.state.value = states.some(([v]) => v === chosen) ? chosen : "";
    $("legend-gradient").hidden = underXla();
    $("legend-xla").hidden = !underXla();
    $("xla-note").hidden = !underXla();
  }
  let view = ops, rowHeight = 26, focusIndex = -1;

  function renderHead() {
    const libraries = [...new Set(releases.map((r) => r.library))];
    let html = "";
    if (libraries.length > 1) {  // group the columns by op library, from the records
      html += '<tr class="groups"><th class="corner" scope="col"></th>';
      for (const lib of libraries) {
        const span = releases.filter((r) => r.library === lib).length;
        // the label sticks beside the op column: centred over 26 columns it was off a phone
        html += `<th scope="colgroup" colspan="${span}"><span class="glabel">${esc(lib)}</span></th>`;
      }
      html += "</tr>";
    }
    html += '<tr class="versions"><th class="corner" scope="col">op <span class="dim">(Python name)</span></th>';
    for (const r of releases) {
      const title = r.label + (r.prerelease ? " (pre-release)" : "") + " · " + r.package +
                    (r.library_version ? " · with TensorFlow " + r.version : "");
      html += `<th scope="col" class="${r.prerelease ? "pre" : ""}" title="${esc(title)}">` +
              `<a href="${esc(r.page)}">${esc(libraries.length > 1 ? r.short : r.label)}</a></th>`;
    }
    head.innerHTML = html + "</tr>";
    const groups = head.querySelector("tr.groups");
    if (groups) grid.style.setProperty("--group-h", groups.offsetHeight + "px");
  }

  function rank(op, q) {
    if (!q) return 0;
    if (op.lname === q) return 0;
    const dotted = q.startsWith("tf.") ? q : "tf." + q;
    if (op.lnames.includes(q) || op.lnames.includes(dotted)) return 1;
    if (op.lname.startsWith(q)) return 2;
    if (op.lname.includes(q)) return 3;
    if (op.lnames.some((n) => n.includes(q))) return 4;
    return -1;
  }

  function matchedName(op, q) {
    if (!q) return op.shown;
    const i = op.lnames.findIndex((n) => n === q || n === "tf." + q);
    if (i >= 0) return op.names[i];
    const j = op.lnames.findIndex((n) => n.includes(q));
    return j >= 0 && !op.lname.includes(q) ? op.names[j] : op.shown;
  }

  function keep(op) {
    if (controls.pub.checked && !op.pub) return false;
    const r = keyIndex.get(controls.rel.value), state = controls.state.value;
    const codes = underXla() ? op.xla : op.codes, of = underXla() ? M.xla_codes : M.codes;
    if (r !== undefined) {
      if (state ? codes[r] !== of[state] : codes[r] === of.absent) return false;
    } else if (state && !codes.includes(of[state])) {
      return false;
    }
    const a = keyIndex.get(controls.from.value), b = keyIndex.get(controls.to.value);
    if (a !== undefined && b !== undefined && codes[a] === codes[b]) return false;
    return true;
  }

  function apply() {
    const q = controls.q.value.trim().toLowerCase();
    const ranked = [];
    ops.forEach((op, i) => {
      const r = rank(op, q);
      if (r >= 0 && keep(op)) ranked.push([r, i, op]);
    });
    if (q) ranked.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    view = ranked.map((x) => x[2]);
    view.query = q;
    $("count").textContent = `${view.length} of ${ops.length} ops`;
    grid.scrollTop = 0;
    focusIndex = -1;
    render();
    saveHash();
  }

  function rowHtml(op, i) {
    const py = matchedName(op, view.query);
    let html = `<tr data-i="${i}"><th scope="row"><a href="${esc(op.page)}">${esc(op.name)}</a>` +
               (py ? `<span class="py">${esc(py)}</span>` : "") + "</th>";
    const xla = underXla();
    for (let c = 0; c < releases.length; c++) {
      const code = xla ? op.xla[c] : op.codes[c], state = xla ? xlaStateOf[code] : stateOf[code];
      const shown = xla ? state.replace(/_/g, " ") : state;
      html += `<td class="s ${xla ? "x" : "s"}-${state}" title="${esc(op.name)} ${esc(releases[c].key)}: ` +
              `${xla ? "under XLA " : ""}${shown}">${xla ? xlaGlyphOf[code] : glyphOf[code]}<span class="sr"> ${shown}</span></td>`;
    }
    return html + "</tr>";
  }

  function render() {
    const total = view.length, cols = releases.length + 1;
    const top = Math.max(0, Math.floor(grid.scrollTop / rowHeight) - 10);
    const end = Math.min(total, top + Math.ceil(grid.clientHeight / rowHeight) + 20);
    let html = `<tr class="spacer" aria-hidden="true"><td colspan="${cols}" style="height:${top * rowHeight}px"></td></tr>`;
    for (let i = top; i < end; i++) html += rowHtml(view[i], i);
    html += `<tr class="spacer" aria-hidden="true"><td colspan="${cols}" style="height:${(total - end) * rowHeight}px"></td></tr>`;
    if (!total) html = `<tr><td colspan="${cols}">No op matches.</td></tr>`;
    const hadFocus = body.contains(document.activeElement);
    body.innerHTML = html;
    if (hadFocus && focusIndex >= top && focusIndex < end) {  // the row was re-drawn: keep focus
      const link = body.querySelector(`tr[data-i="${focusIndex}"] a`);
      if (link) link.focus({ preventScroll: true });
    }
    const first = body.querySelector("tr[data-i]");
    if (first && Math.abs(first.offsetHeight - rowHeight) > 0.5) {
      rowHeight = first.offsetHeight;  // the real height, once: the spacers depend on it
      render();
    }
  }

  function focusRow(i) {
    i = Math.max(0, Math.min(view.length - 1, i));
    focusIndex = i;
    const headH = head.offsetHeight, y = i * rowHeight;
    if (y < grid.scrollTop) grid.scrollTop = y;
    else if (y + rowHeight > grid.scrollTop + grid.clientHeight - headH) {
      grid.scrollTop = y + rowHeight - grid.clientHeight + headH;
    }
    render();
    const link = body.querySelector(`tr[data-i="${i}"] a`);
    if (link) link.focus({ preventScroll: true });
  }

  grid.addEventListener("keydown", (e) => {
    const row = e.target.closest && e.target.closest("tr[data-i]");
    if (!row) return;
    const i = Number(row.dataset.i), page = Math.max(1, Math.floor(grid.clientHeight / rowHeight) - 3);
    const to = { ArrowDown: i + 1, ArrowUp: i - 1, PageDown: i + page, PageUp: i - page,
                 Home: 0, End: view.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    focusRow(to);
  });
  body.addEventListener("focusin", (e) => {
    const row = e.target.closest("tr[data-i]");
    if (row) focusIndex = Number(row.dataset.i);
  });
  let pending = false;
  grid.addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  });
  window.addEventListener("resize", () => render());
  document.addEventListener("keydown", (e) => {
    const typing = /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
    if (e.key === "/" && !typing) { e.preventDefault(); controls.q.focus(); controls.q.select(); }
    if (e.key === "ArrowDown" && document.activeElement === controls.q && view.length) {
      e.preventDefault(); focusRow(0);
    }
    if (e.key === "Escape" && document.activeElement === controls.q) { controls.q.value = ""; apply(); }
  });

  const params = { q: "q", pub: "public", view: "view", rel: "in", state: "state", from: "from", to: "to" };
  function saveHash() {
    const parts = [];
    for (const [k, name] of Object.entries(params)) {
      const el = controls[k], value = el.type === "checkbox" ? (el.checked ? "1" : "") : el.value;
      if (value) parts.push(name + "=" + encodeURIComponent(value));
    }
    try { history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname); } catch (e) { /* some hosts forbid it */ }
  }
  function loadHash() {
    const found = new URLSearchParams(location.hash.slice(1));
    for (const [k, name] of Object.entries(params)) {
      const el = controls[k], value = found.get(name) || "";
      if (el.type === "checkbox") el.checked = value === "1"; else el.value = value;
      if (k === "view") setStates();  // the states of the view, before the state is set
    }
  }
  controls.q.addEventListener("input", apply);
  for (const k of ["pub", "rel", "state", "from", "to"]) controls[k].addEventListener("change", apply);
  controls.view.addEventListener("change", () => { setStates(); apply(); });
  $("reset").addEventListener("click", () => { location.hash = ""; loadHash(); apply(); });
  window.addEventListener("hashchange", () => { loadHash(); showToggle(); apply(); });

  // on a phone the filters fold behind a button, so that the first screen shows rows
  const form = $("controls"), toggle = document.createElement("button");
  toggle.type = "button"; toggle.id = "filters"; toggle.className = "filters-toggle";
  toggle.setAttribute("aria-controls", "controls");
  form.querySelector("label").after(toggle);
  function showToggle() {
    const active = ["pub", "rel", "state", "from", "to"].filter((k) =>
      controls[k].type === "checkbox" ? controls[k].checked : controls[k].value).length;
    const open = !form.classList.contains("folded");
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = (open ? "Hide filters" : "Filters") + (active ? ` (${active})` : "");
  }
  toggle.addEventListener("click", () => { form.classList.toggle("folded"); showToggle(); });
  form.addEventListener("change", showToggle);
  form.classList.add("folded");
  const legendBox = document.querySelector(".legend-box");
  if (legendBox && window.matchMedia("(max-width: 640px)").matches) legendBox.open = false;
  renderHead();
  loadHash();
  showToggle();
  apply();
  document.documentElement.dataset.ready = "1";  // for the tests and the bench
  window.OPREGISTRY_READY_MS = performance.now();
})();
