'use strict';
// Who sends what in the crawler incident (bench:defense part 3), as one seeded, time-ordered
// schedule of requests: { t (ms after the start), cls (index into CLASSES), path, ip }.
//
// - legitimate users: `users` people, each from an address of its own (each in a /24 of its own),
//   each sending at `userRate` req/s on average with exponential gaps (Poisson), for the whole run;
//   30% list pages (GET /api/items?page=n), 70% detail pages (GET /api/items/:id);
// - a crawler rotating through `crawlIps` addresses (each in a /24 of its own), from `crawlStartMs`
//   on, at a uniform `crawlRate` req/s in all, addresses taken in turn, walking the catalogue: a
//   list page, then its 20 items, then the next page;
// - a crawler spread over one /24 (203.0.113.1 .. .254), from `crawlStartMs` on, at a uniform
//   `subnetRate` req/s in all, addresses in turn, the same walk.
// The addresses travel in X-Forwarded-For (the generator plays the proxy in front; see crawl-load.js).
const { prng } = require('./openloop');

const CLASSES = ['legitimate', 'crawler (rotating IPs)', 'crawler (one /24)'];
const LEGIT = 0;
const ROTATING = 1;
const SUBNET = 2;
const SUBNET_PREFIX = '203.0.113';
const ITEMS_PER_PAGE = 20;
const CATALOGUE = 10_000;

const userIp = (u) => `81.${(u >> 8) & 255}.${u & 255}.${17 + ((u * 37) % 200)}`;
const crawlerIp = (i) => `45.${(i >> 8) & 255}.${i & 255}.${9 + ((i * 53) % 240)}`;
const subnetIp = (i) => `${SUBNET_PREFIX}.${1 + (i % 254)}`;

/** The crawl's n-th request path: list page p, then its items, then page p + 1. */
function walkPath(n) {
  const page = Math.floor(n / (ITEMS_PER_PAGE + 1));
  const k = n % (ITEMS_PER_PAGE + 1);
  return k === 0 ? `/api/items?page=${page + 1}` : `/api/items/${(page * ITEMS_PER_PAGE + k - 1) % CATALOGUE}`;
}

function crawlSchedule({ durationMs, crawlStartMs, users, userRate, crawlIps, crawlRate, subnetRate, seed = 5 }) {
  if (users > 65_536 || crawlIps > 65_536) throw new RangeError('at most 65,536 users and crawler addresses');
  const r = prng(seed);
  const events = [];
  for (let u = 0; u < users; u++) {
    const ip = userIp(u);
    let t = (-Math.log(1 - r()) * 1000) / userRate;
    while (t < durationMs) {
      const path = r() < 0.3 ? `/api/items?page=${1 + Math.floor(r() * 50)}` : `/api/items/${Math.floor(r() * CATALOGUE)}`;
      events.push({ t, cls: LEGIT, path, ip });
      t += (-Math.log(1 - r()) * 1000) / userRate;
    }
  }
  const crawl = (cls, rate, ipOf, nIps) => {
    if (!(rate > 0)) return;
    const gap = 1000 / rate;
    for (let n = 0, t = crawlStartMs; t < durationMs; n++, t = crawlStartMs + n * gap) events.push({ t, cls, path: walkPath(n), ip: ipOf(n % nIps) });
  };
  crawl(ROTATING, crawlRate, crawlerIp, crawlIps);
  crawl(SUBNET, subnetRate, subnetIp, 254);
  events.sort((a, b) => a.t - b.t);
  return events;
}

module.exports = { crawlSchedule, CLASSES, LEGIT, ROTATING, SUBNET, SUBNET_PREFIX, userIp, crawlerIp, subnetIp, walkPath };
