// Typed usage of the decision service, its client and the SQL lease stores, checked by `tsc --noEmit --strict`.
import * as http from 'node:http';
import { client, createService, SqliteLeaseStore, type ServiceDecision, type ServiceOptions } from 'tiergate/service';
import { LeaseDriver, Quota, type LeaseStore } from 'tiergate/quota';

const options: ServiceOptions = { port: 0, data: '/tmp/x', adminToken: 'a-token-of-enough-length', logLevel: 'warn' };
const service = createService(options);
service.start().then(({ port }) => port.toFixed(0));
const c = client('http://127.0.0.1:3000', { timeoutMs: 200, failOpen: false });
c.check('user-1', { cost: 2 }).then((d: ServiceDecision) => (d.allowed ? d.remaining : d.error?.code));
http.createServer((req, res) => c.middleware({ key: (r) => String(r.headers['x-api-client']) })(req, res, () => res.end('ok')));
const store: LeaseStore = new SqliteLeaseStore({ file: '/tmp/leases.sqlite' });
new LeaseDriver(new Quota({ limits: [{ name: 'api', algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 20 }] }), store);
// @ts-expect-error failOpen is a boolean
client('http://x', { failOpen: 'no' });
// A framework's own request type, named (docs/service.md): its methods are then typed in `key`.
interface MyRequest extends http.IncomingMessage { get(name: string): string | undefined }
c.middleware<MyRequest>({ key: (req) => req.get('x-api-client') ?? '' });
// @ts-expect-error without it, req is node's IncomingMessage
c.middleware({ key: (req) => req.get('x-api-client') ?? '' });
