'use strict';
// One row of the chaos table, judged: every module of benchmark/chaos/ returns rows of this shape and
// benchmark/chaos.js prints them as one table. A row holds when each of its targets (the documented
// bound of its scenario: docs/cluster.md "What is exact, and what is bounded", docs/service.md
// "Bounded waits") holds; a target that does not is listed, with what was observed, as a failure.

/**
 * `targets`: [[held, 'what the docs promise, with what was observed']]. `admitted`: the text of the
 * "admitted vs limit" cell. `notes`: what else was seen (not judged).
 */
function judged(scenario, { admitted, maxWaitMs, unanswered, targets, notes = '' }) {
  return {
    scenario,
    admitted,
    maxWaitMs: maxWaitMs === null ? null : Math.round(maxWaitMs),
    unanswered,
    targets: targets.map(([, text]) => text),
    failures: targets.filter(([held]) => !held).map(([, text]) => text),
    notes,
  };
}

/** `promise`'s value, or `otherwise` if it has none within `ms`. */
function within(promise, ms, otherwise) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => { timer = setTimeout(resolve, ms, otherwise); })]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const verdict = (r) => (r.failures.length === 0 ? 'holds' : 'FAILS');

/** The rows as one Markdown table; then each failed target (and with `verbose`, every target and note). */
function table(rows, { verbose = false } = {}) {
  const lines = ['| scenario | admitted vs limit | max wait (ms) | unanswered | verdict |', '|---|---|---:|---:|---|'];
  for (const r of rows) lines.push(`| ${r.scenario} | ${r.admitted} | ${r.maxWaitMs ?? '-'} | ${r.unanswered} | ${verdict(r)} |`);
  for (const r of rows) {
    if (!verbose && r.failures.length === 0) continue;
    lines.push('', `${r.scenario}: ${verdict(r)}`);
    for (const t of verbose ? r.targets : r.failures) lines.push(`  ${r.failures.includes(t) ? 'FAILS' : 'holds'}: ${t}`);
    if (verbose && r.notes) lines.push(`  (${r.notes})`);
  }
  return lines.join('\n');
}

module.exports = { judged, within, sleep, table, verdict };
