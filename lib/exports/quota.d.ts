// Types of `tiergate/quota` (lib/exports/quota.js).
export { Quota, LeaseDriver, MemoryStore, QUOTA_CODE, QUOTA_RETURN_REASONS } from '../quota';
export type {
  QuotaLimitCommon, QuotaBucketLimit, QuotaWindowLimit, QuotaLimitOptions, QuotaOptions, QuotaStats, QuotaCode,
  QuotaCodeName, QuotaDecision, QuotaReturnReason, LeaseDriverOptions, LeaseDriverStats,
  LeaseStore, LimitSpec, StoreRequest, StoreGrant, StoreReturn,
} from '../quota';
