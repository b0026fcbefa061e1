'use strict';
// Summaries of repeated runs: the median and the range, as every benchmark reports them.

/** The median of the finite numbers in `xs` (NaN when there are none). */
function median(xs) {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[n >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** "median [min–max]" of `xs`, each formatted by `fmt`. */
function medianRange(xs, fmt = (v) => v.toFixed(1)) {
  const s = xs.filter(Number.isFinite);
  if (s.length === 0) return '—';
  return `${fmt(median(s))} [${fmt(Math.min(...s))}–${fmt(Math.max(...s))}]`;
}

module.exports = { median, medianRange };
