'use strict';
// The shed controller's state against time, one SVG panel per run, to read under the run's goodput
// panel (lib/svg.js): left axis 0..1 — the pressure, each unprotected tier's refill scale, the loop's
// utilisation the controller read (busy, last ~100 ms; drawn when the build reports it) and the
// capacity budget as a share of the measured capacity; right axis — what was shed per 100 ms by the
// turn budget and by the capacity budget. Rows come from scenario.js (`timeline[b].controller`).
const COLORS = { critical: '#c0392b', standard: '#2e86c1', background: '#7f8c8d' };
const PRESSURE = '#111';
const BUDGET = '#27ae60';
const TURN = '#8e44ad';
const CAPACITY = '#d68910';
const BUSY = '#16a085';

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const sum = (o) => Object.values(o || {}).reduce((a, b) => a + b, 0);

/**
 * panels: [{ title, timeline (openLoop rows with `controller`), tiers (unprotected tier names),
 * capacity (req/s, for the budget's share) }]; one right-axis scale for all panels.
 */
function controllerSvg(panels, { width = 860 } = {}) {
  const panelH = 150;
  const m = { l: 58, r: 62, t: 24, b: 24 };
  const height = panels.length * (panelH + 8) + 8;
  const plotW = width - m.l - m.r;
  const plotH = panelH - m.t - m.b;
  let tMax = 1;
  let sMax = 0;
  for (const p of panels) {
    for (const r of p.timeline) {
      tMax = Math.max(tMax, r.t);
      if (r.controller) sMax = Math.max(sMax, sum(r.controller.turnShed), sum(r.controller.capacityShed));
    }
  }
  tMax = Math.ceil(tMax);
  sMax = niceMax(sMax);
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`);
  out.push(`<rect width="100%" height="100%" fill="#fff"/>`);
  panels.forEach((p, i) => {
    const y0 = 4 + i * (panelH + 8);
    const X = (t) => m.l + (t / tMax) * plotW;
    const Y1 = (v) => y0 + m.t + plotH - Math.max(0, Math.min(1, v)) * plotH;
    const YS = (v) => y0 + m.t + plotH - (Math.min(v, sMax) / sMax) * plotH;
    const rows = p.timeline.filter((r) => r.controller);
    out.push(`<text x="${m.l}" y="${y0 + 15}" font-size="12" font-weight="bold">${esc(p.title)}</text>`);
    out.push(`<rect x="${m.l}" y="${y0 + m.t}" width="${plotW}" height="${plotH}" fill="none" stroke="#bbb"/>`);
    for (let k = 0; k <= 4; k++) {
      const y = Y1(k / 4);
      out.push(`<line x1="${m.l}" x2="${m.l + plotW}" y1="${y}" y2="${y}" stroke="#eee"/>`);
      out.push(`<text x="${m.l - 4}" y="${y + 4}" text-anchor="end">${(k / 4).toFixed(2)}</text>`);
      out.push(`<text x="${m.l + plotW + 4}" y="${y + 4}" fill="${TURN}">${((sMax * k) / 4).toFixed(0)}</text>`);
    }
    for (let s = 0; s <= tMax; s++) out.push(`<text x="${X(s)}" y="${y0 + m.t + plotH + 14}" text-anchor="middle">${s}</text>`);
    out.push(`<text x="${width - 12}" y="${y0 + m.t + plotH / 2}" transform="rotate(90 ${width - 12} ${y0 + m.t + plotH / 2})" text-anchor="middle" fill="${TURN}">shed / 100 ms</text>`);
    const line = (pts, color, extra = '') => `<polyline fill="none" stroke="${color}" stroke-width="1.5" ${extra} points="${pts.join(' ')}"/>`;
    const pt = (r, y) => `${X(r.t).toFixed(1)},${y.toFixed(1)}`;
    out.push(line(rows.map((r) => pt(r, YS(sum(r.controller.turnShed)))), TURN, 'stroke-dasharray="2 2"'));
    out.push(line(rows.map((r) => pt(r, YS(sum(r.controller.capacityShed)))), CAPACITY, 'stroke-dasharray="2 2"'));
    for (const tier of p.tiers) out.push(line(rows.map((r) => pt(r, Y1(r.controller.scales[tier] ?? 1))), COLORS[tier] || '#555', 'stroke-dasharray="6 3"'));
    if (rows.some((r) => r.controller.capacity)) {
      out.push(line(rows.map((r) => pt(r, Y1(r.controller.capacity && r.controller.capacity.engaged ? r.controller.capacity.budgetPerSec / p.capacity : 0))), BUDGET));
    }
    const busyRows = rows.filter((r) => typeof r.controller.busy === 'number');
    if (busyRows.length) out.push(line(busyRows.map((r) => pt(r, Y1(r.controller.busy))), BUSY, 'stroke-opacity="0.7"'));
    out.push(line(rows.map((r) => pt(r, Y1(r.controller.pressure))), PRESSURE));
    const legend = [
      ['pressure', PRESSURE, ''],
      ...p.tiers.map((t) => [`scale ${t}`, COLORS[t] || '#555', '6 3']),
      ['busy', BUSY, ''],
      ['capacity budget ÷ capacity (0: not engaged)', BUDGET, ''],
      ['turn sheds', TURN, '2 2'],
      ['capacity sheds', CAPACITY, '2 2'],
    ];
    let lx = m.l + 6;
    const ly = y0 + m.t + 11;
    for (const [name, color, dash] of legend) {
      out.push(`<line x1="${lx}" x2="${lx + 14}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2" ${dash ? `stroke-dasharray="${dash}"` : ''}/><text x="${lx + 17}" y="${ly}">${esc(name)}</text>`);
      lx += 24 + name.length * 5.6;
    }
  });
  out.push(`</svg>`);
  return out.join('\n');
}

/** Stacks whole SVG documents vertically into one (each keeps its own coordinates). */
function stackSvgs(svgs, { width = 860 } = {}) {
  let y = 0;
  const parts = [];
  for (const s of svgs) {
    const h = Number(/height="(\d+(?:\.\d+)?)"/.exec(s)[1]);
    parts.push(s.replace('<svg ', `<svg y="${y}" `));
    y += h;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}">\n${parts.join('\n')}\n</svg>`;
}

module.exports = { controllerSvg, stackSvgs };
