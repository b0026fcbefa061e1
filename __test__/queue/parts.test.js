'use strict';
// The concurrency gate's parts, each alone: the per-tier wait lists, the standing-queue rule (CoDel,
// adaptive LIFO), the one deadline timer and the per-connection watch.
const test = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const { WaitQueues } = require('../../lib/queue/wait-queues');
const { StandingRule, parseCodel } = require('../../lib/queue/standing');
const { DeadlineTimer } = require('../../lib/queue/deadline-timer');
const { ConnectionWatch } = require('../../lib/queue/connections');

test('WaitQueues: FIFO per tier, highest tier first, unlink anywhere, since when non-empty', () => {
  const q = new WaitQueues(3);
  const n = (t0) => ({ t0 });
  const a = n(1);
  const b = n(2);
  const c = n(3);
  const d = n(4);
  q.push(2, a);
  q.push(1, b);
  q.push(2, c);
  q.push(2, d);
  assert.equal(q.size, 4);
  assert.equal(q.peak, 4);
  assert.equal(q.nonEmptySince, 1);
  assert.equal(q.first(), 1);
  assert.equal(q.lowestBelow(0), 2);
  assert.equal(q.lowestBelow(2), -1);
  assert.equal(q.head(2), a);
  assert.equal(q.tail(2), d);
  q.unlink(2, c); // from the middle
  assert.equal(a.next, d);
  assert.equal(d.prev, a);
  q.unlink(1, b);
  assert.equal(q.first(), 2);
  q.unlink(2, a);
  q.unlink(2, d);
  assert.equal(q.size, 0);
  assert.equal(q.first(), -1);
  assert.equal(q.nonEmptySince, -1, 'an empty queue stands for nothing');
  assert.equal(q.peak, 4);
});

test('StandingRule: CoDel shortens unprotected waits once the queue has stood for an interval', () => {
  const rule = new StandingRule(parseCodel({ targetMs: 5, intervalMs: 100 }));
  const q = new WaitQueues(2);
  const vip = { protected: true, queueTimeoutMs: 1000 };
  const free = { protected: false, queueTimeoutMs: 1000 };
  assert.equal(rule.nextChange(q, 0), Infinity, 'empty: nothing will change');
  q.push(1, { t0: 10 });
  assert.equal(rule.standing(q, 109), false);
  assert.equal(rule.nextChange(q, 50), 110);
  assert.equal(rule.allowedWait(free, q, 109), 1000);
  assert.equal(rule.standing(q, 110), true);
  assert.equal(rule.allowedWait(free, q, 110), 5);
  assert.equal(rule.allowedWait(vip, q, 110), 1000, 'a protected tier keeps its timeout');
  assert.equal(rule.nextChange(q, 110), Infinity);
  const noCodel = new StandingRule(parseCodel(undefined));
  assert.equal(noCodel.allowedWait(free, q, 10_000), 1000);
  assert.equal(noCodel.standing(q, 110), true, 'adaptive LIFO still sees a standing queue');
  assert.throws(() => parseCodel({ target: 1 }), { code: 'ERR_TIERGATE_UNKNOWN_OPTION' });
});

test('DeadlineTimer: one timer, re-armed only for an earlier deadline, fires once', async () => {
  let fired = 0;
  const timer = new DeadlineTimer(() => fired++);
  const t = performance.now();
  timer.arm(t + 10_000, t);
  const far = timer.timer;
  timer.arm(t + 20_000, t);
  assert.equal(timer.timer, far, 'a later deadline keeps the armed wake-up');
  timer.arm(t + 5, t);
  assert.notEqual(timer.timer, far);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(fired, 1);
  assert.equal(timer.timer, null);
  timer.arm(t + 5, performance.now());
  timer.disarm();
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(fired, 1, 'a disarmed timer does not fire');
});

test('ConnectionWatch: one close listener per socket, every held response reported once, untracked ones not', () => {
  const closed = [];
  const watch = new ConnectionWatch((res) => closed.push(res.id));
  const socket = new EventEmitter();
  const res = (id) => ({ id, req: { socket } });
  const [r1, r2, r3] = [res(1), res(2), res(3)];
  watch.track(r1);
  watch.track(r2);
  watch.track(r3);
  watch.untrack(r2);
  assert.equal(socket.listenerCount('close'), 1);
  socket.emit('close');
  assert.deepEqual(closed, [1, 3]);
  socket.emit('close');
  assert.deepEqual(closed, [1, 3], 'once');
  watch.track({ id: 4, req: {} }); // no socket (an injected request): nothing to watch
});
