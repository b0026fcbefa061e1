'use strict';
// A small SVG panel of named series against time, each on the left or the right axis (bench:downstream:
// goodput and sheds per second beside the critical tier's latency; requests in flight beside the
// learned limit). Stack panels with controller-svg.js's stackSvgs. Series without any finite value
// (a limit the protection does not have) are left out of the plot and marked "n/a" in the legend.
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const fmt = (v) => (Math.abs(v) >= 10 ? v.toFixed(0) : v.toFixed(1));

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/**
 * { title, note?, rows: [{ t (s), [key]: number|null }], series: [{ key, label, color, axis: 'left'|'right',
 *   dash? }], leftLabel, rightLabel, marks?: [{ t, label }] (vertical lines: phase changes), rightMax? }
 */
function seriesPanelSvg({ title, note = '', rows, series, leftLabel, rightLabel = '', marks = [], rightMax }, { width = 860, height = 170 } = {}) {
  const m = { l: 58, r: 62, t: 26, b: 28 };
  const plotW = width - m.l - m.r;
  const plotH = height - m.t - m.b;
  const tMax = Math.max(1, Math.ceil(rows.reduce((a, r) => Math.max(a, r.t), 0)));
  const present = series.filter((s) => rows.some((r) => Number.isFinite(r[s.key])));
  const maxOf = (axis) => niceMax(present.filter((s) => s.axis === axis).reduce((a, s) => rows.reduce((b, r) => (Number.isFinite(r[s.key]) ? Math.max(b, r[s.key]) : b), a), 0));
  const lMax = maxOf('left');
  const rMax = rightMax ?? maxOf('right');
  const X = (t) => m.l + (t / tMax) * plotW;
  const Y = (v, max) => m.t + plotH - (Math.min(v, max) / max) * plotH;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`);
  out.push(`<rect width="100%" height="100%" fill="#fff"/>`);
  out.push(`<text x="${m.l}" y="16" font-size="12" font-weight="bold">${esc(title)}</text>`);
  if (note) out.push(`<text x="${width - m.r}" y="16" text-anchor="end" fill="#555">${esc(note)}</text>`);
  out.push(`<rect x="${m.l}" y="${m.t}" width="${plotW}" height="${plotH}" fill="none" stroke="#bbb"/>`);
  for (let k = 0; k <= 4; k++) {
    const y = m.t + plotH - (k / 4) * plotH;
    out.push(`<line x1="${m.l}" x2="${m.l + plotW}" y1="${y}" y2="${y}" stroke="#eee"/>`);
    out.push(`<text x="${m.l - 4}" y="${y + 4}" text-anchor="end" fill="#333">${fmt((lMax * k) / 4)}</text>`);
    if (rightLabel) out.push(`<text x="${m.l + plotW + 4}" y="${y + 4}" fill="#333">${fmt((rMax * k) / 4)}</text>`);
  }
  for (let s = 0; s <= tMax; s++) out.push(`<text x="${X(s)}" y="${m.t + plotH + 14}" text-anchor="middle" fill="#333">${s}</text>`);
  for (const mark of marks) {
    out.push(`<line x1="${X(mark.t)}" x2="${X(mark.t)}" y1="${m.t}" y2="${m.t + plotH}" stroke="#999" stroke-dasharray="3 3"/>`);
    out.push(`<text x="${X(mark.t) + 3}" y="${m.t + plotH - 4}" fill="#777" font-size="10">${esc(mark.label)}</text>`);
  }
  out.push(`<text x="14" y="${m.t + plotH / 2}" transform="rotate(-90 14 ${m.t + plotH / 2})" text-anchor="middle" fill="#333">${esc(leftLabel)}</text>`);
  if (rightLabel) out.push(`<text x="${width - 12}" y="${m.t + plotH / 2}" transform="rotate(90 ${width - 12} ${m.t + plotH / 2})" text-anchor="middle" fill="#333">${esc(rightLabel)}</text>`);
  for (const s of present) {
    const max = s.axis === 'right' ? rMax : lMax;
    const pts = rows.filter((r) => Number.isFinite(r[s.key])).map((r) => `${X(r.t).toFixed(1)},${Y(r[s.key], max).toFixed(1)}`);
    out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''} points="${pts.join(' ')}"/>`);
  }
  let lx = m.l + 8;
  for (const s of series) {
    const missing = !present.includes(s);
    const label = `${s.label}${s.axis === 'right' ? ' (right)' : ''}${missing ? ': n/a' : ''}`;
    out.push(`<line x1="${lx}" x2="${lx + 14}" y1="${m.t + 8}" y2="${m.t + 8}" stroke="${s.color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/><text x="${lx + 18}" y="${m.t + 12}"${missing ? ' fill="#999"' : ''}>${esc(label)}</text>`);
    lx += 26 + label.length * 5.6;
  }
  out.push(`</svg>`);
  return out.join('\n');
}

module.exports = { seriesPanelSvg, niceMax };
