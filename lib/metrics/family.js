'use strict';
// A metric family as prom-client's Registry reads it: `{ name, help, type, aggregator, get() }`. The
// registry calls `get()` at scrape time; nothing is counted per request here. These are plain
// objects rather than prom-client Gauge/Counter instances, so they register on any prom-client
// Registry the application has (even another copy of prom-client than the one tiergate resolves).

/**
 * `read(snapshot)` returns `[{ labels, value }]` (histograms: `{ metricName, labels, value }` rows as
 * prom-client prints them); `snapshot()` gives the component's stats, read once per scrape.
 */
class Family {
  constructor({ name, help, type, aggregator = 'sum', read, snapshot }) {
    this.name = name;
    this.help = help;
    this.type = type;
    this.aggregator = aggregator;
    this.read = read;
    this.snapshot = snapshot;
  }

  get() {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.read(this.snapshot()) };
  }
}

/**
 * `fn()` at most once per scrape: prom-client calls every family's `get()` in one synchronous pass,
 * so the value is kept until the current microtask queue runs, then read afresh next scrape.
 */
function oncePerScrape(fn) {
  let value;
  let held = false;
  return () => {
    if (!held) {
      value = fn();
      held = true;
      queueMicrotask(() => {
        held = false;
        value = undefined;
      });
    }
    return value;
  };
}

/** Rows of a Prometheus histogram from cumulative counts at `bounds` (seconds), a count and a sum. */
function histogramRows(name, labels, bounds, cumulative, count, sum) {
  const rows = [];
  for (let i = 0; i < bounds.length; i++) rows.push({ metricName: `${name}_bucket`, labels: { ...labels, le: bounds[i] }, value: cumulative[i] });
  rows.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: count });
  rows.push({ metricName: `${name}_sum`, labels, value: sum });
  rows.push({ metricName: `${name}_count`, labels, value: count });
  return rows;
}

/** One component's family maker: `f(name, type, help, read, aggregator)`, every family over `snapshot`. */
function familyMaker(snapshot) {
  return (name, type, help, read, aggregator) => new Family({ name, type, help, read, snapshot, aggregator });
}

/** A read of one stats() field as one unlabelled sample. */
const oneField = (field) => (s) => [{ value: s[field] }];

module.exports = { Family, familyMaker, oneField, oncePerScrape, histogramRows };
