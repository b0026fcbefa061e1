'use strict';
// Node emits neither 'finish' nor 'close' on the response of a pipelined request that is not yet
// attached to its socket when that connection dies (reset, half-closed, destroyed): only the socket
// says so. Each socket carrying a response the gate holds (a slot or a place in the queue) gets one
// 'close' listener for its lifetime and a set of those responses; entries leave as they leave the gate.

class ConnectionWatch {
  /** `onClose(res)`: called once per held response of a socket that closed. */
  constructor(onClose) {
    this.onClose = onClose;
    this.key = Symbol('tiergate.queue.held'); // socket[key]: the Set; one per gate
    const watch = this;
    this.onSocketClose = function onSocketClose() {
      const held = this[watch.key];
      this[watch.key] = undefined;
      for (const res of held) watch.onClose(res);
    };
  }

  track(res) {
    const socket = res.req && res.req.socket;
    if (socket === null || socket === undefined || typeof socket.once !== 'function') return;
    let held = socket[this.key];
    if (held === undefined) {
      held = new Set();
      socket[this.key] = held;
      socket.once('close', this.onSocketClose);
    }
    held.add(res);
  }

  untrack(res) {
    const socket = res.req && res.req.socket;
    const held = socket ? socket[this.key] : undefined;
    if (held !== undefined) held.delete(res);
  }
}

module.exports = { ConnectionWatch };
