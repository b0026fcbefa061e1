// Types of the root API, `import ... from 'tiergate'`: the values index.js exports (no more:
// __test__/types/exports.ts holds them equal) and the types that describe them. Each component's
// types live beside it in lib/<component>/index.d.ts; the subpaths' are lib/exports/*.d.ts.
export { gatekeeper, Gatekeeper, tiergatePlugin, mintTierToken, DECISION_CHANNEL } from './lib/gatekeeper';
export { BAN_CHANNEL } from './lib/defense';
export { concurrencyGate, concurrencyGatePlugin } from './lib/queue';
export { Ledger, LEDGER_RESULT } from './lib/ledger';
export { LagMonitor } from './lib/lag';
export { metrics, statusRoute, otel } from './lib/metrics';
export { dashboard } from './lib/dashboard';
export { cluster } from './lib/cluster';

export type { BucketOptions, PerKeyOptions, TierOptions, LedgerOptions, TierRef, TierSnapshot, LimitedBy, ConsumeResult } from './lib/ledger';
// LoopObserver: what LagMonitor.observe() returns; a type here, not a value.
export type { LagMonitorOptions, LagStats, LoopSample, LoopObserver } from './lib/lag';
export type {
  RouteRule, ShedOptions, Verdict, TierSource, DecisionInfo, Rejection, RespondResult, GatekeeperOptions, ConcurrencyOptions, ShadowOptions,
  ConcurrencyStats, TierStats, GatekeeperStats, TurnQueueStats, InjectedHealth, GateControls, GatekeeperMiddleware,
  GatekeeperHttpHandler, GatekeeperFactory, KoaContextLike, GatekeeperKoaMiddleware,
} from './lib/gatekeeper';
export type {
  LimitRoute, DefenseVerdict, LimitAlgorithm, LimitBy, LimitOptions, ClusterLimitOptions, StrikeRule, BanOptions, ChallengeInfo,
  ChallengeOptions, Ban, BanEvent, DefenseOptions, FairShareOptions, Bans, DefenseStats, Defense, RateLimitInfo, Limits, LimitKeyState,
} from './lib/defense';
export type {
  QueueTier, AdaptiveLimitOptions, CodelOptions, QueueRejectReason, ConcurrencyGateOptions, WaitSummary, QueueTierStats,
  ConcurrencyGateStats, QueueRejection, ConcurrencyGate, ConcurrencyGateControls, ConcurrencyGateMiddleware,
  ConcurrencyGateHttpHandler, ConcurrencyGateKoaMiddleware, ConcurrencyGateFunction,
} from './lib/queue';
export type {
  ObservedComponents, PromRegistry, MetricsOptions, TiergateMetrics, StatusRouteOptions, HealthReport, StatsReport, StatusRoute,
  OtelMeter, OtelOptions, TiergateOtel,
} from './lib/metrics';
export type { DashboardOptions, Dashboard } from './lib/dashboard';
// What cluster() takes and returns (Cluster: a type here; the class is 'tiergate/cluster').
export type { Cluster, ClusterOptions, ClusterTierOptions, ClusterTierLimit, ClusterStats, ClusterLimits, ClusterLimitKeyState, RedisLike } from './lib/cluster';
