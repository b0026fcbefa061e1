'use strict';
// A TCP proxy that delays every chunk by `delayMs` in each direction: Redis one network hop away
// (`npm run bench:cluster`'s "1 ms" table). Run as a child: argv [targetPort, delayMs]; reports its
// port by IPC. Order within a connection is kept (each chunk is due no earlier than the one before).
const net = require('node:net');

const [targetPort, delayMs] = process.argv.slice(2).map(Number);

function delayed(from, to) {
  let last = 0;
  from.on('data', (chunk) => {
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
  delayed(client, upstream);
  delayed(upstream, client);
});
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('message', (m) => {
  if (m.op === 'stop') process.exit(0);
});
