// Typed usage of the Ledger API, checked by `tsc --noEmit --strict` in __test__/api/types.test.js.
import { Ledger, LEDGER_RESULT } from 'tiergate';
import type { ConsumeResult, LedgerOptions, LimitedBy, TierSnapshot } from 'tiergate';
import { LEDGER_HANDLE, ledgerHandle, type LedgerHandle } from '../../lib/ledger'; // internal: not exported

const options: LedgerOptions = {
  tiers: [
    { name: 'critical', limit: 2000, windowMs: 1000, protected: true },
    { name: 'standard', limit: 1000, windowMs: 1000, perKey: { limit: 20, windowMs: 4000, maxKeys: 50_000, idleTtlMs: 30_000 } },
    { name: 'background', limit: 500, windowMs: 5000, perKey: null },
  ],
  perKey: { limit: 10, windowMs: 10000 },
};
const ledger = new Ledger(options);
const shared: Ledger = Ledger.shared('api', options);
const attached: Ledger = Ledger.shared('api');

const id: number = ledger.tierId('standard');
const ok: boolean = ledger.tryConsume(id, 'user-1') && ledger.tryConsume('critical') && ledger.tryConsume(0, undefined, 2.5);
const out = new Float64Array(LEDGER_RESULT.LENGTH);
if (!ledger.consume('standard', 'user-1', 1, out)) {
  const retryAfterSec: number = Math.ceil(out[LEDGER_RESULT.RETRY_AFTER_MS] / 1000);
  const remaining: number = ledger.result[LEDGER_RESULT.REMAINING];
  void [retryAfterSec, remaining];
}
const details: ConsumeResult = Ledger.readResult(ledger.result);
const by: LimitedBy = details.limitedBy;
ledger.setRefillScale('background', 0.5);
const scale: number = ledger.refillScale(2);
const snap: TierSnapshot[] = ledger.snapshot();
const n: number = ledger.reset() + ledger.reset('standard') + ledger.reset(1, 'user-1');
const names: readonly string[] = ledger.tiers;
const same: boolean = shared.isSameLedger(attached);
const handle: LedgerHandle = ledgerHandle(ledger);
const sym: symbol = LEDGER_HANDLE;

// @ts-expect-error the key is a string
ledger.tryConsume(0, 42);
// @ts-expect-error options need tiers
new Ledger({});
// @ts-expect-error a tier needs windowMs
new Ledger({ tiers: [{ name: 'a', limit: 1 }] });
// @ts-expect-error tiers are read-only
ledger.tiers.push('x');

void [ok, by, scale, snap, n, names, same, handle, sym, id];
