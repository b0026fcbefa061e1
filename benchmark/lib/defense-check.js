'use strict';
// Before the cost comparison times a composition, it is checked to enforce the policy at all (a chain
// that checked nothing would be fast): built with tight numbers, on the same harness,
//   - a deny-listed address is refused;
//   - a fresh address is admitted `ip.limit` times in a window, then refused;
//   - after its refusals it stays refused past the window (banned), while another address that was
//     only at its limit is admitted again once the window has passed;
//   - a user over the per-user quota of its tier is refused from any address.
const { send } = require('./chain-harness');
const { POLICY } = require('./defense-policy');

const TIGHT = Object.freeze({
  ...POLICY,
  ip: { limit: 3, windowMs: 1000 },
  user: { limit: 1, windowMs: 1_000_000, burst: 5 },
  bans: { ...POLICY.bans, strikes: 3 },
});

function spec(ip, user, tier = 'background') {
  const headers = { host: 'api.example.test', 'x-forwarded-for': ip, [TIGHT.userHeader]: user, [TIGHT.tierHeader]: tier };
  const raw = [];
  for (const k of Object.keys(headers)) raw.push(k, headers[k]);
  return { url: '/api/items', headers, raw };
}

/** Returns [] when `build(TIGHT)` enforces the policy, else what it failed. */
async function checkComposition(build) {
  const chain = build(TIGHT);
  const failed = [];
  const expect = (what, r, admitted) => {
    if (r.admitted !== admitted) failed.push(`${what}: ${r.admitted ? 'admitted' : `refused ${r.status}`}`);
  };
  let u = 0;
  const fresh = () => `check-user-${u++}`;
  expect('deny-listed address', await send(chain, spec('240.2.7.7', fresh())), false);
  for (let i = 0; i < TIGHT.ip.limit; i++) {
    expect(`address A, request ${i + 1}`, await send(chain, spec('198.51.100.10', fresh())), true);
    expect(`address B, request ${i + 1}`, await send(chain, spec('198.51.100.20', fresh())), true);
  }
  for (let i = 0; i < TIGHT.bans.strikes; i++) expect(`address A over its limit, ${i + 1}`, await send(chain, spec('198.51.100.10', fresh())), false);
  await new Promise((r) => setTimeout(r, TIGHT.ip.windowMs + 150));
  expect('address A after the window (banned)', await send(chain, spec('198.51.100.10', fresh())), false);
  expect('address B after the window', await send(chain, spec('198.51.100.20', fresh())), true);
  for (let i = 0; i < TIGHT.user.burst; i++) expect(`user H, request ${i + 1}`, await send(chain, spec(`198.51.100.${100 + i}`, 'heavy')), true);
  expect('user H over its quota', await send(chain, spec('198.51.100.200', 'heavy')), false);
  return failed;
}

module.exports = { checkComposition, TIGHT };
