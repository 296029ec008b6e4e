"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const models = DATA.models;
  const probeNames = [...new Set(models.flatMap(m => Object.keys(m.probes)))];
  const state = { probe: probeNames[0], label: "overall", sort: "count", reference: 0,
                  model: 0, head: null, sentence: 0, rare: false, hidden: new Set() };
  const $ = id => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";

  // ---- colours: viridis for scores, blue-white-red for deltas -------------------------------------
  const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
                   [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
  function viridis(t) {
    t = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
    const i = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - i;
    const c = VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  function diverging(t) { // t in [-1, 1]
    t = Math.min(1, Math.max(-1, t));
    const a = Math.round(255 * (1 - Math.abs(t)));
    return t >= 0 ? `rgb(255,${a},${a})` : `rgb(${a},${a},255)`;
  }
  const unsigned = x => Math.abs(x) < 0.0005 ? 0 : x;  // never "-0.000" (as probes.base.wording.fixed)
  const fmt = x => (x === null || x === undefined || Number.isNaN(x)) ? "–" : unsigned(Number(x)).toFixed(3);
  const signed = x => (unsigned(x) >= 0 ? "+" : "") + unsigned(x).toFixed(3);

  // ---- data access ---------------------------------------------------------------------------------
  function probeOf(m) { return models[m].probes[state.probe]; }
  function labelOf(m, name) {
    const p = probeOf(m);
    if (!p) return null;
    return name === "overall" ? p.overall : (p.labels.find(l => l.name === name) || null);
  }
  // labels below the run's --min-count: left out of the table, the head details and the chart across models unless
  // asked (state.rare), greyed with their count when shown
  function listed(labels) { return labels.filter(l => state.rare || !l.rare); }
  // a label's reported head {l, h, v, kind, ...} (the best, or the --select-on choice), or null where its results
  // name none (a tie at the top, a top score of 0)
  function best(label) { return label.best.why === undefined ? label.best : null; }
  function decode(b64, Type) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }

  // ---- header, probe tabs ---------------------------------------------------------------------------
  function header() {
    $("models").innerHTML = "";
    models.forEach((m, i) => {
      const s = document.createElement("span");
      s.textContent = `${String.fromCharCode(65 + i)}: ${m.name} (${m.layers}×${m.heads})`;
      s.title = m.model;
      $("models").appendChild(s);
    });
    $("reference-box").style.display = models.length > 1 ? "" : "none";
    models.forEach((m, i) => {
      const o = document.createElement("option");
      o.value = i; o.textContent = m.name;
      $("reference").appendChild(o);
    });
    $("reference").onchange = () => { state.reference = +$("reference").value; grids(); };
    probeNames.forEach(name => {
      const b = document.createElement("button");
      b.textContent = name; b.dataset.probe = name;
      b.onclick = () => { state.probe = name; state.label = "overall"; state.head = null; state.sentence = 0; all(); };
      $("probes").appendChild(b);
    });
  }

  // ---- label table ----------------------------------------------------------------------------------
  function labelRows() {
    const m = models.findIndex(x => x.probes[state.probe]);
    const p = probeOf(m);
    const rows = [p.overall, ...listed(p.labels)].map(l => {
      const b = best(l);
      const base = l.baseline ? l.baseline.score : null;
      return { name: l.name, count: l.count, rare: !!l.rare, best: b ? `L${b.l}-H${b.h}` : `none: ${l.best.why}`, score: b ? b.v : null,
               baseline: base, offset: l.baseline ? l.baseline.offset : null,
               margin: b && b.margin !== undefined ? b.margin : null };
    });
    const key = state.sort;
    const value = r => r[key] === null ? -Infinity : r[key];
    rows.sort((a, b) => a.name === "overall" ? -1 : b.name === "overall" ? 1 :
              key === "name" || key === "best" ? String(a[key]).localeCompare(String(b[key])) : value(b) - value(a));
    return rows;
  }
  function labels() {
    const body = document.querySelector("#labels tbody"), p = probeOf(models.findIndex(x => x.probes[state.probe]));
    body.innerHTML = "";
    labelRows().forEach(r => {
      const tr = document.createElement("tr");
      tr.dataset.label = r.name;
      if (r.name === state.label) tr.className = "on";
      if (r.rare) { tr.classList.add("rare"); tr.title = `${r.count} instances: below --min-count ${p.min_count}`; }
      const off = r.offset === null ? "" : ` (${r.offset > 0 ? "+" : ""}${r.offset})`;  // coref: a kind ("nearest")
      tr.innerHTML = `<td></td><td class="num">${r.count}</td><td>${r.best}</td><td class="num">${fmt(r.score)}</td>` +
        `<td class="num">${r.baseline === null ? "–" : fmt(r.baseline) + off}</td>` +
        `<td class="num">${r.margin === null ? "–" : signed(r.margin)}</td>`;
      tr.firstChild.textContent = r.name;
      tr.onclick = () => { state.label = r.name; labels(); grids(); across(); };
      body.appendChild(tr);
    });
    const rare = p.labels.filter(l => l.rare).length;
    $("rare-box").style.display = rare ? "" : "none";
    $("rare-text").textContent = `${rare} label${rare === 1 ? "" : "s"} below --min-count ${p.min_count}`;
    $("rare").checked = state.rare;
    $("rare").onchange = () => { state.rare = $("rare").checked; labels(); details(); across(); };
    document.querySelectorAll("#labels th").forEach(th => {
      th.classList.toggle("sorted", th.dataset.sort === state.sort);
      th.onclick = () => { state.sort = th.dataset.sort; labels(); };
    });
  }

  // ---- grids ----------------------------------------------------------------------------------------
  function gridTable(m, grid, colour, label, kind) {
    const table = document.createElement("table");
    table.className = "grid";
    table.style.setProperty("--heads", grid[0].length);  // the cells' height follows their width (report.css)
    const top = document.createElement("tr");
    top.innerHTML = "<th></th>" + grid[0].map((_, h) => `<th>${h}</th>`).join("");
    table.appendChild(top);
    const b = kind === "delta" ? null : best(label);
    grid.forEach((row, l) => {
      const tr = document.createElement("tr");
      tr.innerHTML = `<th>L${l}</th>`;
      row.forEach((v, h) => {
        const td = document.createElement("td");
        td.className = "cell";
        td.dataset.model = m; td.dataset.layer = l; td.dataset.head = h; td.dataset.kind = kind;
        td.style.background = v === null ? "#eee" : colour(v);
        if (b && b.l === l && b.h === h) td.classList.add("best");
        if (state.head && state.model === m && state.head[0] === l && state.head[1] === h) td.classList.add("picked");
        td.onmousemove = e => tip(e, m, l, h, label, kind);
        td.onmouseleave = () => { $("tip").style.display = "none"; };
        td.onclick = () => pick(m, l, h);
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    return table;
  }
  function range(label) {
    const values = label.scores.flat().filter(v => v !== null);
    const lo = Math.min(...values), hi = Math.max(...values);
    return lo >= 0 && hi <= 1 ? [0, 1] : [lo, hi > lo ? hi : lo + 1e-9];
  }
  function grids() {
    const box = $("grids");
    box.innerHTML = "";
    $("grids-title").textContent = `${state.probe}: ${state.label}`;
    models.forEach((model, m) => {
      const label = labelOf(m, state.label);
      if (!label) return;
      const [lo, hi] = range(label);
      const div = document.createElement("div");
      div.className = "grid-box";
      div.innerHTML = `<h4>${String.fromCharCode(65 + m)}: </h4>`;
      div.firstChild.append(`${model.name} · n=${label.count}`);
      div.appendChild(gridTable(m, label.scores, v => viridis((v - lo) / (hi - lo)), label, "score"));
      const scale = document.createElement("div");
      scale.className = "scale";
      scale.innerHTML = `${fmt(lo)}<span style="background:linear-gradient(90deg,${[0, .25, .5, .75, 1].map(viridis).join(",")})"></span>${fmt(hi)}` +
        ` · red box: ${label.best.kind === "selected" ? "head chosen on the selection split" : "best head"}` +
        " · click a cell for its details and sentences";
      div.appendChild(scale);
      box.appendChild(div);
    });
    const ref = labelOf(state.reference, state.label);
    models.forEach((model, m) => {
      const label = labelOf(m, state.label);
      if (m === state.reference || !label || !ref || model.layers !== models[state.reference].layers ||
          model.heads !== models[state.reference].heads) return;
      const delta = label.scores.map((row, l) => row.map((v, h) =>
        v === null || ref.scores[l][h] === null ? null : v - ref.scores[l][h]));
      const span = Math.max(1e-9, ...delta.flat().filter(v => v !== null).map(Math.abs));
      const div = document.createElement("div");
      div.className = "grid-box delta";
      div.innerHTML = "<h4></h4>";
      div.firstChild.textContent = `Δ ${model.name} − ${models[state.reference].name}`;
      div.appendChild(gridTable(m, delta, v => diverging(v / span), label, "delta"));
      const scale = document.createElement("div");
      scale.className = "scale";
      scale.innerHTML = `${fmt(-span)}<span style="background:linear-gradient(90deg,${[-1, -.5, 0, .5, 1].map(diverging).join(",")})"></span>${fmt(span)}`;
      div.appendChild(scale);
      box.appendChild(div);
    });
    details();
  }
  function tip(e, m, l, h, label, kind) {
    const lines = [`${models[m].name} · ${state.probe}: ${label.name} · L${l}-H${h}`,
                   `score ${fmt(label.scores[l][h])}`];
    if (kind === "delta") {
      const ref = labelOf(state.reference, label.name);
      lines.push(`reference ${fmt(ref.scores[l][h])} · Δ ${fmt(label.scores[l][h] - ref.scores[l][h])}`);
    }
    const extra = label.extra || {};
    const ci = label.interval;
    if (ci && kind !== "delta") lines.push(`95% interval [${fmt(ci.low[l][h])}, ${fmt(ci.high[l][h])}]`);
    Object.keys(extra).forEach(k => lines.push(`${k} ${fmt(extra[k][l][h])}`));
    lines.push(`count ${label.count}`);
    if (label.baseline) lines.push(`baseline ${typeof label.baseline.offset === "string" ? "" : "offset "}${label.baseline.offset > 0 ? "+" : ""}${label.baseline.offset}: ${fmt(label.baseline.score)}`);
    const t = $("tip");
    t.textContent = lines.join("\n");
    t.style.display = "block";
    t.style.left = (e.clientX + 14) + "px";
    t.style.top = (e.clientY + 14) + "px";
  }
  function pick(m, l, h) {
    state.model = m; state.head = [l, h];
    grids(); sentences();
  }
  function details() {
    const box = $("details");
    box.innerHTML = "";
    if (!state.head) { box.textContent = "Click a head for its scores on every label."; return; }
    const [l, h] = state.head, p = probeOf(state.model);
    if (!p) return;
    const rows = [p.overall, ...listed(p.labels)].map(x => {
      const v = x.scores[l][h], b = best(x);
      const rank = v === null ? null : 1 + x.scores.flat().filter(y => y !== null && y > v).length;
      return { name: x.name, v, rank, best: b, count: x.count, rare: !!x.rare };
    }).filter(r => r.v !== null).sort((a, b) => (a.rank - b.rank) || (b.count - a.count)).slice(0, 12);
    const title = document.createElement("h3");
    title.textContent = `${models[state.model].name} · L${l}-H${h}: the labels it ranks highest on`;
    box.appendChild(title);
    const t = document.createElement("table");
    t.innerHTML = "<tr><th>label</th><th>count</th><th>score</th><th>rank</th><th>best head</th></tr>" + rows.map(r =>
      `<tr${r.rare ? ' class="rare"' : ""}><td>${r.name.replace(/</g, "&lt;")}</td><td>${r.count}</td><td>${fmt(r.v)}</td><td>${r.rank} of ${models[state.model].layers * models[state.model].heads}</td>` +
      `<td>${r.best ? `L${r.best.l}-H${r.best.h} ${fmt(r.best.v)}` : "none"}</td></tr>`).join("");
    box.appendChild(t);
  }

  // ---- per-sentence view ----------------------------------------------------------------------------
  function currentHead() {
    if (state.head) return state.head;
    const label = labelOf(state.model, state.label) || probeOf(state.model).overall;
    const b = best(label);
    return b ? [b.l, b.h] : [0, 0];
  }
  function sentences() {
    const m = probeOf(state.model) ? state.model : models.findIndex(x => x.probes[state.probe]);
    state.model = m;
    const p = probeOf(m), model = models[m];
    const [l, h] = currentHead();
    $("view-head").textContent = `L${l}-H${h}`;
    $("view-model").textContent = `${model.name} · ${state.probe}`;
    const select = $("sentence");
    select.innerHTML = "";
    p.sentences.forEach((key, i) => {
      const o = document.createElement("option");
      const s = model.sentences[key];
      o.value = i; o.textContent = `[${s.id}] ${s.words.join(" ")}`.slice(0, 110);
      select.appendChild(o);
    });
    $("arcs").innerHTML = ""; $("attention").innerHTML = "";
    const kind = p.kind || (p.segments.length ? "segments" : null);
    // the labels' source: "gold", or "silver" where spaCy made them (the result's annotation)
    $("view-title").innerHTML = kind ? LEGENDS[kind].replaceAll("gold", p.annotation || "gold") : "";
    $("view-title").style.display = kind ? "" : "none";
    if (kind === "segments") $("arcs").appendChild(segments(p.segments, l * model.heads + h));
    if (!p.sentences.length) {
      $("view-note").textContent = "this result keeps no sentences (run with --examples N)";
      return;
    }
    state.sentence = Math.min(state.sentence, p.sentences.length - 1);
    select.value = state.sentence;
    select.onchange = () => { state.sentence = +select.value; sentences(); };
    $("prev").onclick = () => { state.sentence = Math.max(0, state.sentence - 1); sentences(); };
    $("next").onclick = () => { state.sentence = Math.min(p.sentences.length - 1, state.sentence + 1); sentences(); };
    const s = model.sentences[p.sentences[state.sentence]];
    const argmax = decode(s.argmax, Uint16Array);
    const pred = Array.from(argmax.subarray((l * model.heads + h) * s.width, (l * model.heads + h + 1) * s.width));
    const map = s.maps[`${l}-${h}`];
    $("view-note").textContent = (kind ? "" : `${state.probe} has no per-sentence view of its own; `) +
      (map ? "" : `attention map not kept for L${l}-H${h} (kept: each label's best head` +
      (p.named.length ? " and " + p.named.map(x => `L${x[0]}-H${x[1]}`).join(", ") : "") + "; name more with --heads)");
    const v = p.views[state.sentence], marks = headMarks(v, l * model.heads + h);
    if (p.kind === "units") $("arcs").appendChild(units(s, v.items, marks, p.names));
    else if (p.kind) spread($("arcs").appendChild(arcs(s, itemArcs(v.items, marks), below(v.items, marks, pred))));
    if (map) $("attention").appendChild(attention(s, decode(map, Uint8Array)));
  }
  // ---- the probe's own view: its items of the sentence, and per head what the probe made of each (probes.results.examples)
  const LEGENDS = {
    arcs: 'gold arcs against the head <small><span class="right">■ right</span> <span class="wrong">■ wrong</span> ' +
          "(above: gold; below: where the head points each word: its argmax, or for trees its decoded tree)</small>",
    roles: 'predicate → argument <small><span class="right">■ right</span> <span class="wrong">■ wrong</span> ' +
           "(above: each argument from its predicate; below: the head's argmax from each word)</small>",
    frames: 'target → frame element <small><span class="right">■ right</span> <span class="wrong">■ wrong</span> ' +
            "(the head's argmax links them; the number: the largest attention weight between them)</small>",
    mentions: 'anaphor → antecedent <small><span class="right">■ right</span> <span class="wrong">■ wrong</span> ' +
              "(above: each anaphor's head word to an antecedent's; below: where each anaphor's head word looks most)</small>",
    units: 'each unit: gold label over the label the head predicts <small><span class="right">■ right</span> ' +
           '<span class="wrong">■ wrong</span></small>',
    segments: "segmentation <small>(seg's example sentences: the gold words, then the words the head's word ends " +
              "make, as probes show prints them)</small>" };
  function segments(examples, row) { // seg: each example's gold words, then the words the head's word ends make
    const box = document.createElement("div");
    box.className = "segments";
    examples.forEach(ex => {
      const words = [];
      let text = "";
      ex.units.forEach((u, i) => {  // as probes show: a unit ends a word where the head says so, or at the last unit
        text += u;
        if (ex.ends[row][i] === "1" || i === ex.units.length - 1) { words.push(text); text = ""; }
      });
      const p = document.createElement("p");
      p.innerHTML = '<span class="sid"></span><br>gold: <span class="gold"></span><br>head: <span class="head"></span>';
      p.querySelector(".sid").textContent = `[${ex.id}]`;
      p.querySelector(".gold").textContent = ex.gold.join(" ");
      p.querySelector(".head").textContent = words.join(" ");
      box.appendChild(p);
    });
    return box;
  }
  const MARK_TYPES = { right: Uint8Array, weight: Uint8Array, predicted: Int16Array, head: Int16Array };
  function headMarks(v, row) { // {name: [items]} of one head (row l * H + h of each [L*H, items] mark)
    const n = v.items.length, out = {};
    Object.entries(v.marks).forEach(([k, b64]) => {
      out[k] = Array.from(decode(b64, MARK_TYPES[k]).subarray(row * n, (row + 1) * n));
    });
    return out;
  }
  function itemArcs(items, marks) { // arcs above: from a head / predicate / target word to its item
    return items.map((it, k) => {
      const one = x => Array.isArray(x) ? x[0] : x;
      const weight = marks.weight ? ` ${(marks.weight[k] / 255).toFixed(2)}` : "";
      return { from: one(it.from), to: one(it.to), label: it.label + weight, right: marks.right ? !!marks.right[k] : null };
    }).filter(a => a.to !== undefined && a.from !== a.to);  // an argument of the predicate's word alone: no arc
  }
  function below(items, marks, pred) { // arcs below: each word's argmax, or for trees the decoded tree's head
    if (marks.head) {
      const heads = [];
      items.forEach((it, k) => { heads[Array.isArray(it.to) ? it.from[0] : it.to] = marks.head[k]; });  // mentions: the anaphor's
      return heads;
    }
    return pred;
  }
  function units(s, items, marks, names) {
    const words = [specials(s)[0], ...s.words];
    const widths = words.map(w => Math.max(44, 7.5 * w.length + 14));
    const x = []; let acc = 10;
    widths.forEach(w => { x.push(acc); acc += w; });
    const svg = el("svg", { width: acc + 10, height: 70, "data-units": items.length });
    words.forEach((w, i) => {
      const t = el("text", { x: x[i] + widths[i] / 2, y: 16, "text-anchor": "middle", "font-weight": i ? "normal" : "bold" }, svg);
      t.textContent = w;
    });
    items.forEach((it, k) => {
      const x1 = x[it.from] + 3, x2 = x[it.to] + widths[it.to] - 3, mid = (x1 + x2) / 2;
      const right = marks.right ? !!marks.right[k] : null;
      const colour = right === null ? "#555" : right ? "#2e7d32" : "#c62828";
      el("path", { d: `M${x1},22 L${x1},26 L${x2},26 L${x2},22`, fill: "none", stroke: colour, "stroke-width": 1.5,
                   class: right === null ? "unit" : right ? "unit right" : "unit wrong" }, svg);
      el("text", { x: mid, y: 40, "text-anchor": "middle", "font-size": 11 }, svg).textContent = it.label;
      const p = el("text", { x: mid, y: 56, "text-anchor": "middle", "font-size": 11, fill: colour }, svg);
      p.textContent = marks.predicted ? names[marks.predicted[k]] : "–";
    });
    return svg;
  }
  // the root and end columns' names: the model's own special tokens ([CLS], [SEP]; <s>, </s>), as in probes show
  const specials = s => s.specials || ["[ROOT]", "[END]"];
  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
    if (parent) parent.appendChild(e);
    return e;
  }
  // each gold arc's level: 1 + the highest level of the arcs whose span lies within its own (shortest first), so
  // that an arc is drawn above every arc it spans; the arcs drawn with flat tops at their level's height
  function levels(gold) {
    const spans = gold.map(a => [Math.min(a.from, a.to), Math.max(a.from, a.to)]);
    const order = gold.map((_, k) => k).sort((i, j) => (spans[i][1] - spans[i][0]) - (spans[j][1] - spans[j][0]));
    const level = [];
    order.forEach(k => {
      level[k] = 1 + Math.max(0, ...order.filter(j => level[j] !== undefined &&
        spans[j][0] >= spans[k][0] && spans[j][1] <= spans[k][1]).map(j => level[j]));
    });
    return level;
  }
  const LEVEL = 20;  // px between two levels of arcs
  function arcs(s, gold, pred) {
    const words = [specials(s)[0], ...s.words];
    const widths = words.map(w => Math.max(44, 7.5 * w.length + 14));
    const x = []; let acc = 10;
    widths.forEach(w => { x.push(acc + w / 2); acc += w; });
    const level = levels(gold);
    const up = 16 + LEVEL * Math.max(1, ...level);
    const down = 90, base = up + 10;
    const svg = el("svg", { width: acc + 10, height: base + 30 + down, "data-arcs": gold.length });
    el("defs", {}, svg).innerHTML = '<marker id="ah" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/></marker>';
    const labels = [];
    gold.forEach((a, k) => {
      const x1 = x[a.from], x2 = x[a.to], top = base - LEVEL * level[k] - 4, dir = x2 > x1 ? 1 : -1;
      const r = Math.min(6, Math.abs(x2 - x1) / 2);
      const colour = a.right === null ? "#555" : a.right ? "#2e7d32" : "#c62828";
      el("path", { d: `M${x1},${base - 4} L${x1},${top + r} Q${x1},${top} ${x1 + dir * r},${top} ` +
                      `L${x2 - dir * r},${top} Q${x2},${top} ${x2},${top + r} L${x2},${base - 4}`, fill: "none",
                   stroke: colour, "stroke-width": 1.8, "marker-end": "url(#ah)",
                   class: a.right === null ? "arc" : a.right ? "arc right" : "arc wrong" }, svg);
      labels.push([a, (x1 + x2) / 2, top, colour]);
    });
    labels.forEach(([a, mid, top, colour]) => {  // over the arcs: each on its arc's top, on a white halo
      const t = el("text", { x: mid, y: top + 4, "text-anchor": "middle", fill: colour, class: "arc-label" }, svg);
      t.textContent = a.label;
    });
    words.forEach((w, i) => {
      const t = el("text", { x: x[i], y: base + 14, "text-anchor": "middle", "font-weight": i ? "normal" : "bold" }, svg);
      t.textContent = w;
    });
    for (let i = 1; i < words.length; i++) {
      const j = pred[i];
      if (j === undefined || j < 0) continue;
      const x1 = x[i], x2 = x[j], hgt = Math.min(down - 8, 10 + 10 * Math.abs(j - i));
      el("path", { d: `M${x1},${base + 22} C${x1},${base + 22 + hgt} ${x2},${base + 22 + hgt} ${x2},${base + 22}`,
                   fill: "none", stroke: "#78909c", "stroke-width": 1.2, "marker-end": "url(#ah)", class: "argmax" }, svg);
    }
    return svg;
  }
  // once drawn (text is measured in the page): each arc label that meets one placed before it moves up until it
  // meets none, shortest arcs' labels first; the picture grows upwards where a label left it
  function spread(svg) {
    const GAP = 1, placed = [];
    const meets = (a, b) => a.x < b.x + b.width + GAP && b.x < a.x + a.width + GAP &&
                            a.y < b.y + b.height + GAP && b.y < a.y + a.height + GAP;
    svg.querySelectorAll("text.arc-label").forEach(t => {
      let box = t.getBBox(), hit;
      while ((hit = placed.find(p => meets(p, box)))) {
        t.setAttribute("y", +t.getAttribute("y") - (box.y + box.height - hit.y) - GAP - 0.5);
        box = t.getBBox();
      }
      placed.push(box);
    });
    const top = Math.min(0, ...placed.map(b => b.y - 2));
    if (top < 0) {
      const width = +svg.getAttribute("width"), height = +svg.getAttribute("height") - top;
      svg.setAttribute("viewBox", `0 ${top} ${width} ${height}`);
      svg.setAttribute("height", height);
    }
  }
  function attention(s, weights) {
    const words = [specials(s)[0], ...s.words, specials(s)[1]], n = words.length, row = 18;
    const svg = el("svg", { width: 560, height: n * row + 20 });
    const lines = el("g", {}, svg);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const w = weights[i * n + j] / 255;
        if (w < 0.02) continue;
        el("line", { x1: 150, y1: 14 + i * row - 4, x2: 410, y2: 14 + j * row - 4, stroke: "#1565c0",
                     "stroke-opacity": w, "stroke-width": 1 + 3 * w, "data-from": i }, lines);
      }
    }
    words.forEach((w, i) => {
      const left = el("text", { x: 140, y: 14 + i * row, "text-anchor": "end", class: "word" }, svg);
      left.textContent = w;
      left.onmouseenter = () => lines.querySelectorAll("line").forEach(e => {
        e.style.display = +e.dataset.from === i ? "" : "none"; });
      left.onmouseleave = () => lines.querySelectorAll("line").forEach(e => { e.style.display = ""; });
      const right = el("text", { x: 420, y: 14 + i * row, "text-anchor": "start" }, svg);
      right.textContent = w;
    });
    return svg;
  }

  // ---- across models (a study's checkpoints): each label's best-head score against the model ----------
  // at most 10 lines: overall in near-black under the others, then matplotlib's tab10 without its grey
  const PALETTE = ["#212121", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                   "#bcbd22", "#17becf"];
  function acrossSeries() {
    const first = models.findIndex(x => x.probes[state.probe]);
    const p = probeOf(first);
    const names = ["overall", ...listed(p.labels).sort((a, b) => b.count - a.count).map(l => l.name)]
      .slice(0, PALETTE.length);
    if (!names.includes(state.label)) names.splice(Math.min(names.length, PALETTE.length - 1), 1, state.label);
    return names.map(name => ({ name, points: models.map((_, m) => {
      const label = labelOf(m, name), b = label && best(label);
      // no point where the result names no head (a tie at the top, a top score of 0): the tables' "no best head"
      return b ? { m, v: b.v, head: `L${b.l}-H${b.h}`, count: label.count } : null;
    }) }));
  }
  function across() {
    const box = $("across");
    box.innerHTML = "";
    $("across-panel").style.display = models.length > 1 ? "" : "none";
    if (models.length < 2) return;
    const series = acrossSeries();
    const values = series.flatMap(s => s.points.filter(p => p).map(p => p.v));
    const lo = Math.min(0, ...values), hi = Math.max(1e-9, ...values);
    const left = 90, top = 10, width = Math.max(320, 110 * (models.length - 1)), height = 220, legend = 190;
    const x = m => left + (models.length === 1 ? 0 : m * width / (models.length - 1));
    const y = v => top + height - (v - lo) / (hi - lo) * height;
    const svg = el("svg", { width: left + width + legend + 20, height: Math.max(top + height + 40, 30 + 16 * series.length),
                            "data-series": series.length });
    [lo, (lo + hi) / 2, hi].forEach(v => {
      el("line", { x1: left, x2: left + width, y1: y(v), y2: y(v), stroke: "#ddd" }, svg);
      el("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, svg).textContent = fmt(v);
    });
    models.forEach((model, m) => {
      const t = el("text", { x: x(m), y: top + height + 18, "text-anchor": "middle" }, svg);
      t.textContent = `${String.fromCharCode(65 + m)}: ${model.name}`.slice(0, 22);
    });
    const keys = el("g", { class: "legend" }, svg);
    series.forEach((s, i) => {
      const colour = PALETTE[i % PALETTE.length], dx = (i - (series.length - 1) / 2) * 2;  // equal lines side by side
      const g = el("g", { class: "series" + (s.name === state.label ? " on" : ""), "data-label": s.name }, svg);
      const key = `${state.probe}\t${s.name}`, hidden = state.hidden.has(key);  // hidden: by probe and label
      let d = "";
      s.points.forEach((p, m) => {  // a break in the line where a model has no point
        if (p) d += `${m && s.points[m - 1] ? "L" : "M"}${x(p.m) + dx},${y(p.v)}`;
      });
      el("path", { d, fill: "none", stroke: colour, "stroke-width": i === 0 ? 3 : 1.6,
                   "stroke-opacity": i === 0 ? 0.55 : 1 }, g);
      s.points.filter(p => p).forEach(p => {
        const c = el("circle", { cx: x(p.m) + dx, cy: y(p.v), r: 3, fill: colour }, g);
        el("title", {}, c).textContent = `${s.name} · ${models[p.m].name}: ${p.head} ${fmt(p.v)} (n=${p.count})`;
      });
      g.style.display = hidden ? "none" : "";
      g.onclick = () => { state.label = s.name; labels(); grids(); across(); };
      // the legend: click an entry to hide or show its line
      const entry = el("g", { class: "entry" + (hidden ? " off" : ""), "data-label": s.name }, keys);
      const ky = top + 12 + 16 * i;
      el("rect", { x: left + width + 12, y: ky - 12, width: legend, height: 16, fill: "#fff", "fill-opacity": 0 }, entry);
      el("line", { x1: left + width + 16, x2: left + width + 34, y1: ky - 4, y2: ky - 4, stroke: colour,
                   "stroke-width": i === 0 ? 3 : 2 }, entry);
      const t = el("text", { x: left + width + 40, y: ky, fill: colour }, entry);
      t.textContent = s.points.some(p => p) ? s.name : `${s.name} (no best head)`;
      el("title", {}, entry).textContent = "click to hide or show this line";
      entry.onclick = () => { if (hidden) state.hidden.delete(key); else state.hidden.add(key); across(); };
    });
    box.appendChild(svg);
  }

  function all() {
    document.querySelectorAll("#probes button").forEach(b => b.classList.toggle("on", b.dataset.probe === state.probe));
    labels(); grids(); across(); sentences();
  }
  header();
  all();
})();
