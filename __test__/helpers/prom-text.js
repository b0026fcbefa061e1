'use strict';
// A strict reader of the Prometheus text exposition format (0.0.4): every line is a HELP, a TYPE or
// a sample of a declared family; names and labels well-formed; values numbers; histogram buckets
// cumulative with +Inf equal to _count. Throws on the first violation, naming the line.
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"/y;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(v, line) {
  if (v === '+Inf') return Infinity;
  if (v === '-Inf') return -Infinity;
  if (v === 'NaN') return NaN;
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(v)) throw new Error(`bad value "${v}" in: ${line}`);
  return Number(v);
}

function parseLabels(s, line) {
  const labels = {};
  let i = 0;
  while (i < s.length) {
    LABEL.lastIndex = i;
    const m = LABEL.exec(s);
    if (m === null) throw new Error(`bad labels in: ${line}`);
    if (m[1] in labels) throw new Error(`duplicate label ${m[1]} in: ${line}`);
    labels[m[1]] = m[2];
    i = LABEL.lastIndex;
    if (i < s.length) {
      if (s[i] !== ',') throw new Error(`bad labels in: ${line}`);
      i++;
    }
  }
  return labels;
}

/** Map name -> { type, help, samples: [{ name, labels, value }] }. */
function parsePrometheusText(text) {
  if (!text.endsWith('\n')) throw new Error('exposition does not end with a newline');
  const families = new Map();
  const familyOf = (sample) => {
    if (families.has(sample)) return families.get(sample);
    const base = sample.replace(/_(bucket|sum|count)$/, '');
    const f = families.get(base);
    return f && (f.type === 'histogram' || f.type === 'summary') ? f : undefined;
  };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m;
    if ((m = /^# HELP (\S+) (.*)$/.exec(line))) {
      if (!NAME.test(m[1])) throw new Error(`bad name in: ${line}`);
      if (families.has(m[1]) && families.get(m[1]).help !== undefined) throw new Error(`second HELP: ${line}`);
      families.set(m[1], { ...(families.get(m[1]) || { samples: [] }), help: m[2] });
    } else if ((m = /^# TYPE (\S+) (\S+)$/.exec(line))) {
      if (!TYPES.has(m[2])) throw new Error(`bad type in: ${line}`);
      const f = families.get(m[1]) || { samples: [] };
      if (f.type !== undefined || f.samples.length > 0) throw new Error(`TYPE after samples or twice: ${line}`);
      families.set(m[1], { ...f, type: m[2] });
    } else if (line.startsWith('#')) {
      continue;
    } else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line))) {
      const f = familyOf(m[1]);
      if (f === undefined || f.type === undefined) throw new Error(`sample of an undeclared family: ${line}`);
      f.samples.push({ name: m[1], labels: parseLabels(m[2] || '', line), value: parseValue(m[3], line) });
    } else {
      throw new Error(`unparseable line: ${line}`);
    }
  }
  for (const [name, f] of families) {
    if (f.type !== 'histogram') continue;
    const series = new Map();
    for (const s of f.samples) {
      const { le, ...rest } = s.labels;
      const k = JSON.stringify(rest);
      if (!series.has(k)) series.set(k, { buckets: [], count: undefined });
      if (s.name === `${name}_bucket`) series.get(k).buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
      if (s.name === `${name}_count`) series.get(k).count = s.value;
    }
    for (const [k, { buckets, count }] of series) {
      for (let i = 1; i < buckets.length; i++) {
        if (!(buckets[i][0] > buckets[i - 1][0]) || buckets[i][1] < buckets[i - 1][1]) throw new Error(`${name}${k}: buckets not ascending and cumulative`);
      }
      const inf = buckets[buckets.length - 1];
      if (!inf || inf[0] !== Infinity || inf[1] !== count) throw new Error(`${name}${k}: +Inf bucket missing or not equal to _count`);
    }
  }
  return families;
}

/** The value of the sample `name` whose labels include `labels`. */
function sampleValue(families, name, labels = {}) {
  const base = families.get(name) || families.get(name.replace(/_(bucket|sum|count)$/, ''));
  if (!base) return undefined;
  const s = base.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === String(v)));
  return s && s.value;
}

module.exports = { parsePrometheusText, sampleValue };
