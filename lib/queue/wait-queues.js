'use strict';
// The waiting requests: one FIFO per tier (a doubly linked list: O(1) push, pop at either end and
// unlink of a waiter whose client left), index 0 the highest priority. Also tracks since when the
// queue as a whole has been non-empty: CoDel and adaptive LIFO act on a standing queue.

/** A waiter: `{ tier, t0, ... }`; the lists own `prev`/`next`. */
class WaitQueues {
  constructor(tierCount) {
    this.lists = Array.from({ length: tierCount }, () => ({ head: null, tail: null, size: 0 }));
    this.size = 0;
    this.peak = 0;
    this.nonEmptySince = -1; // when the queue last went from empty to non-empty (-1: empty)
  }

  /** Appends `node` (its `t0`: when it arrived) to tier `id`'s list. */
  push(id, node) {
    const list = this.lists[id];
    node.prev = list.tail;
    node.next = null;
    if (list.tail !== null) list.tail.next = node;
    else list.head = node;
    list.tail = node;
    list.size++;
    if (this.size === 0) this.nonEmptySince = node.t0;
    this.size++;
    if (this.size > this.peak) this.peak = this.size;
  }

  /** Removes `node` from tier `id`'s list. */
  unlink(id, node) {
    const list = this.lists[id];
    if (node.prev !== null) node.prev.next = node.next;
    else list.head = node.next;
    if (node.next !== null) node.next.prev = node.prev;
    else list.tail = node.prev;
    node.prev = node.next = null;
    list.size--;
    this.size--;
    if (this.size === 0) this.nonEmptySince = -1;
  }

  head(id) {
    return this.lists[id].head;
  }

  tail(id) {
    return this.lists[id].tail;
  }

  sizeOf(id) {
    return this.lists[id].size;
  }

  /** The highest-priority tier with a waiter, or -1. */
  first() {
    for (let i = 0; i < this.lists.length; i++) if (this.lists[i].size > 0) return i;
    return -1;
  }

  /** The lowest-priority tier below `id` (a higher index) with a waiter, or -1. */
  lowestBelow(id) {
    for (let i = this.lists.length - 1; i > id; i--) if (this.lists[i].size > 0) return i;
    return -1;
  }
}

module.exports = { WaitQueues };
