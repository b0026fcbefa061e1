'use strict';
// Where a benchmark server's loop went, from CPU profiles (`node benchmark/overload.js --cpu-prof DIR`):
// each sample's time goes to the route's work (any frame in benchmark/lib/work.js below it), else to
// the script its own frame is in — tiergate (lib/), the framework (node_modules), node's own code —
// or to V8's GC, idle and (program). Prints one line of shares per profile.
//   node benchmark/profile-split.js DIR/*.cpuprofile
const fs = require('node:fs');
const path = require('node:path');

const WORK_SCRIPT = path.join(__dirname, 'lib', 'work.js');
const LIB = path.join(__dirname, '..', 'lib') + path.sep;
const SPECIAL = new Map([['(idle)', 'idle'], ['(garbage collector)', 'GC'], ['(program)', 'program']]);

function split(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id);
  const kinds = new Map();
  // A native frame (no script) is charged to the nearest frame above it that has one.
  const kindOf = (id) => {
    if (kinds.has(id)) return kinds.get(id);
    const { functionName, url } = byId.get(id).callFrame;
    const file = url.startsWith('file://') ? url.slice(7) : url;
    const up = parent.has(id) ? kindOf(parent.get(id)) : 'native';
    let kind;
    if (up === 'work' || file === WORK_SCRIPT) kind = 'work';
    else if (SPECIAL.has(functionName)) kind = SPECIAL.get(functionName);
    else if (file.startsWith(LIB)) kind = 'tiergate';
    else if (file.includes(`${path.sep}node_modules${path.sep}`)) kind = 'framework';
    else if (file.startsWith('node:')) kind = 'node';
    else if (file) kind = 'benchmark';
    else kind = up;
    kinds.set(id, kind);
    return kind;
  };
  const us = {};
  let all = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const d = profile.timeDeltas[i + 1] ?? 0; // a sample's time runs to the next sample
    const k = kindOf(profile.samples[i]);
    us[k] = (us[k] || 0) + d;
    all += d;
  }
  return { seconds: all / 1e6, shares: Object.entries(us).sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, (100 * v) / all]) };
}

for (const file of process.argv.slice(2)) {
  const { seconds, shares } = split(JSON.parse(fs.readFileSync(file, 'utf8')));
  console.log(`${path.basename(file)} (${seconds.toFixed(1)} s): ${shares.map(([k, pct]) => `${k} ${pct.toFixed(1)}%`).join(', ')}`);
}
