'use strict';
// A TCP proxy in front of Redis for `npm run bench:cluster`: it delays every chunk by `delayMs` in
// each direction (0: none; 1: Redis one 1 ms hop away) and counts the commands clients send, as sent
// (a pipeline of n is n; a script is one, whatever it calls inside). Run as a child: argv
// [targetPort, delayMs]; reports its port by IPC; answers { op: 'count' } with the commands so far.
const net = require('node:net');

const [targetPort, delayMs] = process.argv.slice(2).map(Number);
let commands = 0;

/** Counts the RESP commands (arrays of bulk strings, or inline lines) in a client's byte stream. */
function commandCounter() {
  let buf = Buffer.alloc(0);
  let pendingArgs = -1; // bulk strings still to skip in the current command (-1: between commands)
  let bulk = -1; // bytes (plus CRLF) still to skip of the current bulk string
  return (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    let i = 0;
    for (;;) {
      if (bulk >= 0) {
        if (buf.length - i < bulk + 2) break;
        i += bulk + 2;
        bulk = -1;
        if (--pendingArgs === 0) pendingArgs = -1;
        continue;
      }
      const eol = buf.indexOf('\r\n', i);
      if (eol < 0) break;
      const line = buf.toString('latin1', i, eol);
      i = eol + 2;
      if (pendingArgs < 0) {
        commands++;
        if (line[0] === '*') pendingArgs = Number(line.slice(1)) || -1;
      } else if (line[0] === '$') bulk = Number(line.slice(1));
    }
    buf = buf.subarray(i);
  };
}

function pipe(from, to, onData) {
  let last = 0;
  from.on('data', (chunk) => {
    if (onData) onData(chunk);
    if (delayMs === 0) return to.write(chunk);
    const due = Math.max(Date.now() + delayMs, last);
    last = due;
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, due - Date.now());
  });
  from.on('close', () => setTimeout(() => to.destroy(), delayMs));
  from.on('error', () => to.destroy());
}

const server = net.createServer((client) => {
  client.setNoDelay(true);
  const upstream = net.connect(targetPort, '127.0.0.1');
  upstream.setNoDelay(true);
  pipe(client, upstream, commandCounter());
  pipe(upstream, client);
});
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('message', (m) => {
  if (m.op === 'count') process.send({ stats: commands });
  if (m.op === 'stop') process.exit(0);
});
