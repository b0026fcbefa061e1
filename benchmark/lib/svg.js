'use strict';
// A small dependency-free SVG timeline: one panel per configuration, goodput per tier (req/s, left
// axis) and the server's event-loop lag (ms, right axis) against time. `right` plots another of the
// rows' fields on the right axis instead (bench:defense: the server's CPU).
const COLORS = { critical: '#c0392b', standard: '#2e86c1', background: '#7f8c8d', all: '#27ae60' };
const PALETTE = ['#c0392b', '#2e86c1', '#7f8c8d', '#27ae60', '#8e44ad', '#d68910'];
const LAG_COLOR = '#e67e22';

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const fmt = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(0) : v.toFixed(1));

/** A "nice" axis maximum at or above v. */
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const LAG_AXIS = Object.freeze({ field: 'serverLagMs', axis: 'server lag ms', legend: 'server lag (max per 100 ms', clip: true });

/**
 * panels: [{ title, timeline: [{ t, goodput: {tier: req/s}, serverLagMs }], tiers: [names],
 *            thresholdMs?, note? }]; options: { title, width, right: { field, axis, legend, max? } }
 */
function timelineSvg(panels, { title = '', width = 860, lagClipMs = 250, right = LAG_AXIS } = {}) {
  const field = right.field;
  const panelH = 190;
  const top = title ? 34 : 8;
  const m = { l: 58, r: 62, t: 26, b: 30 };
  const height = top + panels.length * (panelH + 12) + 16;
  const plotW = width - m.l - m.r;
  const plotH = panelH - m.t - m.b;
  // One goodput scale and one lag scale for every panel, so panels compare at a glance.
  let gMax = 0;
  let lMax = 0;
  let tMax = 0;
  for (const p of panels) {
    for (const row of p.timeline) {
      tMax = Math.max(tMax, row.t);
      lMax = Math.max(lMax, row[field] || 0);
      for (const tier of p.tiers) gMax = Math.max(gMax, row.goodput[tier] || 0);
    }
    if (p.thresholdMs) lMax = Math.max(lMax, p.thresholdMs);
  }
  gMax = niceMax(gMax);
  // The lag axis is clipped so that one collapsing configuration does not flatten every other
  // panel's lag line; clipped points sit on the top edge.
  const clipped = right.clip === true && lMax > lagClipMs;
  lMax = right.max !== undefined ? right.max : niceMax(right.clip === true ? Math.min(lMax, lagClipMs) : lMax);
  tMax = Math.max(1, Math.ceil(tMax));
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`);
  out.push(`<rect width="100%" height="100%" fill="#fff"/>`);
  if (title) out.push(`<text x="${width / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  panels.forEach((p, i) => {
    const y0 = top + i * (panelH + 12);
    const X = (t) => m.l + (t / tMax) * plotW;
    const YG = (g) => y0 + m.t + plotH - (g / gMax) * plotH;
    const YL = (l) => y0 + m.t + plotH - (Math.min(l, lMax) / lMax) * plotH;
    out.push(`<g>`);
    out.push(`<text x="${m.l}" y="${y0 + 16}" font-size="12" font-weight="bold">${esc(p.title)}</text>`);
    if (p.note) out.push(`<text x="${width - m.r}" y="${y0 + 16}" text-anchor="end" fill="#555">${esc(p.note)}</text>`);
    out.push(`<rect x="${m.l}" y="${y0 + m.t}" width="${plotW}" height="${plotH}" fill="none" stroke="#bbb"/>`);
    for (let k = 0; k <= 4; k++) {
      const g = (gMax * k) / 4;
      const y = YG(g);
      out.push(`<line x1="${m.l}" x2="${m.l + plotW}" y1="${y}" y2="${y}" stroke="#eee"/>`);
      out.push(`<text x="${m.l - 4}" y="${y + 4}" text-anchor="end" fill="#333">${fmt(g)}</text>`);
      out.push(`<text x="${m.l + plotW + 4}" y="${y + 4}" fill="${LAG_COLOR}">${fmt((lMax * k) / 4)}</text>`);
    }
    for (let s = 0; s <= tMax; s++) {
      const x = X(s);
      out.push(`<text x="${x}" y="${y0 + m.t + plotH + 14}" text-anchor="middle" fill="#333">${s}</text>`);
    }
    out.push(`<text x="14" y="${y0 + m.t + plotH / 2}" transform="rotate(-90 14 ${y0 + m.t + plotH / 2})" text-anchor="middle" fill="#333">goodput req/s</text>`);
    out.push(`<text x="${width - 12}" y="${y0 + m.t + plotH / 2}" transform="rotate(90 ${width - 12} ${y0 + m.t + plotH / 2})" text-anchor="middle" fill="${LAG_COLOR}">${esc(right.axis)}</text>`);
    if (p.thresholdMs) {
      const y = YL(p.thresholdMs);
      out.push(`<line x1="${m.l}" x2="${m.l + plotW}" y1="${y}" y2="${y}" stroke="${LAG_COLOR}" stroke-dasharray="2 4"/>`);
    }
    const line = (vals, color, extra = '') =>
      `<polyline fill="none" stroke="${color}" stroke-width="1.6" ${extra} points="${vals.join(' ')}"/>`;
    out.push(line(p.timeline.map((r) => `${X(r.t).toFixed(1)},${YL(r[field] || 0).toFixed(1)}`), LAG_COLOR, 'stroke-dasharray="5 3"'));
    p.tiers.forEach((tier, k) => {
      const color = COLORS[tier] || PALETTE[k % PALETTE.length];
      out.push(line(p.timeline.map((r) => `${X(r.t).toFixed(1)},${YG(r.goodput[tier] || 0).toFixed(1)}`), color));
    });
    // legend
    let lx = m.l + 8;
    const ly = y0 + m.t + 12;
    for (const [k, tier] of p.tiers.entries()) {
      const color = COLORS[tier] || PALETTE[k % PALETTE.length];
      out.push(`<line x1="${lx}" x2="${lx + 16}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"/><text x="${lx + 20}" y="${ly}">${esc(tier)}</text>`);
      lx += 30 + tier.length * 6.5;
    }
    out.push(`<line x1="${lx}" x2="${lx + 16}" y1="${ly - 4}" y2="${ly - 4}" stroke="${LAG_COLOR}" stroke-width="2" stroke-dasharray="5 3"/><text x="${lx + 20}" y="${ly}">${esc(right.legend)}${right.clip === true ? `${clipped ? `; axis clipped at ${fmt(lMax)} ms` : ''})` : ''}${p.thresholdMs ? '; dotted: threshold' : ''}</text>`);
    out.push(`</g>`);
  });
  out.push(`<text x="${width / 2}" y="${height - 2}" text-anchor="middle" fill="#333">time (s)</text>`);
  out.push(`</svg>`);
  return out.join('\n');
}

module.exports = { timelineSvg };
