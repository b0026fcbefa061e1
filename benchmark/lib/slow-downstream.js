'use strict';
// A slow HTTP downstream (an upstream API, a worker pool): every request takes `serviceMs`, at most
// `concurrency` are served at once and the rest wait in arrival order, unbounded, like a thread pool's
// queue. It does not notice that a caller stopped waiting: a queued request is served anyway (as a
// database runs a query whose client timed out), unless the caller's connection has closed. GET /stats answers { inService, queued, served, maxInService }.
//
//   const ds = await startSlowDownstream({ serviceMs: 20, concurrency: 4 }); ds.port; await ds.close();
//   node benchmark/lib/slow-downstream.js 20 4   (a process of its own: prints {"port":n} on stdout)
const http = require('node:http');

function startSlowDownstream({ serviceMs = 20, concurrency = 4, host = '127.0.0.1', port = 0 } = {}) {
  if (!(serviceMs >= 0) || !Number.isFinite(serviceMs)) throw new RangeError(`serviceMs must be a finite number >= 0, got ${serviceMs}`);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a whole number >= 1, got ${concurrency}`);
  let inService = 0;
  let maxInService = 0;
  let served = 0;
  const queue = []; // responses waiting for a slot, oldest first
  const serve = (res) => {
    inService++;
    maxInService = Math.max(maxInService, inService);
    setTimeout(() => {
      inService--;
      served++;
      if (!res.destroyed) {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('downstream ok');
      }
      next();
    }, serviceMs);
  };
  // The next queued request whose caller is still connected: a caller's connection closes only when
  // its process ends (between benchmark runs), so within a run every queued request is served.
  const next = () => {
    while (queue.length) {
      const res = queue.shift();
      if (!res.socket || res.socket.destroyed) continue;
      serve(res);
      return;
    }
  };
  const server = http.createServer((req, res) => {
    if (req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ inService, queued: queue.length, served, maxInService }));
      return;
    }
    req.resume();
    if (inService < concurrency) serve(res);
    else queue.push(res);
  });
  server.keepAliveTimeout = 60_000;
  server.maxConnections = Infinity;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, backlog: 4096 }, () =>
      resolve({
        port: server.address().port,
        stats: () => ({ inService, queued: queue.length, served, maxInService }),
        close: () => new Promise((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
      }),
    );
  });
}

module.exports = { startSlowDownstream };

if (require.main === module) {
  const [serviceMs, concurrency] = process.argv.slice(2).map(Number);
  startSlowDownstream({ serviceMs, concurrency }).then((ds) => {
    process.stdout.write(JSON.stringify({ port: ds.port }) + '\n');
    process.on('SIGTERM', () => ds.close().then(() => process.exit(0)));
    process.on('disconnect', () => process.exit(0));
  });
}
