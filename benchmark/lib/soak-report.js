'use strict';
// The soak's figures: the RSS trend (least-squares slope), the text tables and a small SVG timeline.

const MB = 1024 * 1024;
const mb = (bytes) => (bytes / MB).toFixed(1);

/** Least-squares slope of ys over xs (units of y per unit of x); 0 for fewer than two points. */
function slope(xs, ys) {
  const n = xs.length;
  if (n < 2) return 0;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < n; i++) {
    sx += xs[i];
    sy += ys[i];
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/**
 * The memory trend of the load phase: samples [{ t (s), rss, heapUsed }] taken while the load ran.
 * Growth over the second half is the fitted slope times that half's length (robust to one noisy sample).
 */
function memoryTrend(samples, durationS) {
  const half = samples.filter((s) => s.t >= durationS / 2);
  const t = half.map((s) => s.t);
  const rssSlope = slope(t, half.map((s) => s.rss)); // bytes/s
  const heapSlope = slope(t, half.map((s) => s.heapUsed));
  const span = half.length > 1 ? half[half.length - 1].t - half[0].t : 0;
  return {
    samples: half.length,
    rssSlopeMbPerMin: (rssSlope * 60) / MB,
    rssGrowthMb: (rssSlope * span) / MB,
    heapSlopeMbPerMin: (heapSlope * 60) / MB,
    heapGrowthMb: (heapSlope * span) / MB,
    spanS: span,
  };
}

/** A plain-text table: rows of cells, the first row the header; numbers right-aligned. */
function table(rows) {
  const widths = [];
  for (const row of rows) row.forEach((c, i) => (widths[i] = Math.max(widths[i] || 0, String(c).length)));
  return rows
    .map((row, r) => {
      const line = row.map((c, i) => (typeof c === 'number' || (r > 0 && i > 0) ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
      return r === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

const OUTCOMES = ['2xx', '429', '503', '408', '400', '431', '403', '404', '413', '500', 'other', 'reset', 'aborted', 'timeout', 'refused', 'error', 'cut'];

/** Outcome counts per load kind (and in total), only the columns that occurred. */
function outcomeTable(counts) {
  const kinds = Object.keys(counts);
  const total = Object.create(null);
  for (const k of kinds) for (const [o, n] of Object.entries(counts[k])) total[o] = (total[o] || 0) + n;
  const cols = OUTCOMES.filter((o) => total[o]).concat(Object.keys(total).filter((o) => !OUTCOMES.includes(o)));
  const rows = [['client', ...cols, 'all']];
  const sum = (c) => Object.values(c).reduce((a, b) => a + b, 0);
  for (const k of kinds) rows.push([k, ...cols.map((o) => counts[k][o] || 0), sum(counts[k])]);
  rows.push(['total', ...cols.map((o) => total[o] || 0), sum(total)]);
  return { text: table(rows), total };
}

// ---- SVG: stacked panels of lines against time ----
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const COLORS = ['#c0392b', '#2e86c1', '#27ae60', '#8e44ad', '#d68910', '#7f8c8d'];

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** panels: [{ title, unit, series: [{ name, points: [[t, v]] }], marks?: [t] }] */
function timelineSvg(panels, { title, width = 900 } = {}) {
  const panelH = 170;
  const m = { l: 60, r: 150, t: 24, b: 26 };
  const top = 30;
  const height = top + panels.length * (panelH + 10) + 10;
  const plotW = width - m.l - m.r;
  const plotH = panelH - m.t - m.b;
  let tMax = 1;
  for (const p of panels) for (const s of p.series) for (const [t] of s.points) tMax = Math.max(tMax, t);
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`, `<text x="${m.l}" y="20" font-size="14" font-weight="bold">${esc(title || '')}</text>`];
  panels.forEach((p, pi) => {
    const y0 = top + pi * (panelH + 10);
    let vMax = 0;
    for (const s of p.series) for (const [, v] of s.points) vMax = Math.max(vMax, v);
    vMax = niceMax(vMax);
    const X = (t) => m.l + (t / tMax) * plotW;
    const Y = (v) => y0 + m.t + plotH - (v / vMax) * plotH;
    out.push(`<text x="${m.l}" y="${y0 + 14}" font-weight="bold">${esc(p.title)}</text>`);
    out.push(`<rect x="${m.l}" y="${y0 + m.t}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`);
    for (let i = 0; i <= 4; i++) {
      const v = (vMax * i) / 4;
      out.push(`<text x="${m.l - 4}" y="${Y(v) + 4}" text-anchor="end">${+v.toPrecision(3)}</text>`);
    }
    for (let i = 0; i <= 6; i++) {
      const t = (tMax * i) / 6;
      out.push(`<text x="${X(t)}" y="${y0 + panelH - 10}" text-anchor="middle">${Math.round(t)} s</text>`);
    }
    out.push(`<text x="14" y="${y0 + m.t + plotH / 2}" transform="rotate(-90 14 ${y0 + m.t + plotH / 2})" text-anchor="middle">${esc(p.unit)}</text>`);
    for (const t of p.marks || []) out.push(`<line x1="${X(t)}" x2="${X(t)}" y1="${y0 + m.t}" y2="${y0 + m.t + plotH}" stroke="#bbb" stroke-dasharray="3,3"/>`);
    p.series.forEach((s, si) => {
      const color = COLORS[si % COLORS.length];
      if (s.points.length) out.push(`<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${s.points.map(([t, v]) => `${X(t).toFixed(1)},${Y(v).toFixed(1)}`).join(' ')}"/>`);
      out.push(`<text x="${m.l + plotW + 10}" y="${y0 + m.t + 12 + si * 14}" fill="${color}">${esc(s.name)}</text>`);
    });
  });
  out.push('</svg>');
  return out.join('\n');
}

module.exports = { slope, memoryTrend, table, outcomeTable, timelineSvg, mb, MB };
