// The published types export exactly the values the code does (the lists of __test__/api/exports.test.js):
// a Record over `keyof typeof` a module namespace fails to compile on a missing or an extra name.
// Types are not in it: a class the root exports as a type only is pinned below as not a value.
import * as root from 'tiergate';
import * as clusterMode from 'tiergate/cluster';
import * as quota from 'tiergate/quota';
import * as service from 'tiergate/service';

const rootNames: Record<keyof typeof root, true> = {
  BAN_CHANNEL: true, DECISION_CHANNEL: true, Gatekeeper: true, LEDGER_RESULT: true, LagMonitor: true, Ledger: true,
  cluster: true, concurrencyGate: true, concurrencyGatePlugin: true, dashboard: true, gatekeeper: true, metrics: true,
  mintTierToken: true, otel: true, statusRoute: true, tiergatePlugin: true,
};
// @ts-expect-error LoopObserver is a type at the root, not a value
void root.LoopObserver;
// @ts-expect-error Cluster is a type at the root; the class is 'tiergate/cluster'
void root.Cluster;
const clusterNames: Record<keyof typeof clusterMode, true> = { BanChannel: true, Cluster: true, PostgresStore: true, RedisStore: true, cluster: true };
const quotaNames: Record<keyof typeof quota, true> = { LeaseDriver: true, MemoryStore: true, QUOTA_CODE: true, QUOTA_RETURN_REASONS: true, Quota: true };
const serviceNames: Record<keyof typeof service, true> = {
  PostgresLeaseStore: true, ServiceClient: true, SqliteLeaseStore: true, client: true, createService: true,
};
void [rootNames, clusterNames, quotaNames, serviceNames];

// Types of the root's components come with it; a type-only class is not a value.
import type { LoopObserver, GatekeeperOptions, ClusterOptions } from 'tiergate';
declare const observer: LoopObserver;
void observer.sample();
const options: GatekeeperOptions = {};
void options;
const clusterOptions: ClusterOptions = { redis: 'redis://127.0.0.1:6379' };
void clusterOptions;
