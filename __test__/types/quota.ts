// Typed usage of the lease engine, driver and store contract, checked by `tsc --noEmit --strict`.
import { Quota, LeaseDriver, MemoryStore, QUOTA_CODE } from 'tiergate/quota';
import type { LeaseStore, StoreGrant, StoreRequest, StoreReturn, QuotaDecision } from 'tiergate/quota';

const quota = new Quota({
  limits: [
    { name: 'api', algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 20, fallback: 'closed' },
    { name: 'daily', algorithm: 'fixed-window', limit: 1000, windowMs: 86_400_000, unfunded: 'provisional', provisional: 2 },
  ],
  maxKeys: 10_000,
});
const custom: LeaseStore = {
  async lease(batch: StoreRequest[]): Promise<StoreGrant[]> {
    return batch.map((r) => ({ granted: Math.min(r.size, 1), ttlMs: r.ttlMs, remaining: 0, holders: 1, lease: 0, retryAfterMs: 1000 }));
  },
  async release(_batch: StoreReturn[]): Promise<void> {},
};
const driver = new LeaseDriver(quota, new MemoryStore(), { storeTimeoutMs: 50 });
const other = new LeaseDriver(quota, custom);
const r = driver.spend(quota.limitId('api'), 'user-1');
if (typeof r === 'number') {
  const admitted: boolean = r === QUOTA_CODE.LEASE;
  void admitted;
} else {
  r.then((d: QuotaDecision) => d.retryAfterMs);
}
driver.check(1, 'k', 2).then((d) => (d.allowed ? d.reason : d.retryAfterMs));
const fb: number = driver.stats().fallbackDecisions;
void fb;
void driver.close();
void other.close();
