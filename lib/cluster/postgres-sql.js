'use strict';
// The SQL of the PostgreSQL store (./postgres-store.js): one table of (limit, key) states and two
// plpgsql functions, the lease store contract (lib/quota/store.js) run inside the database the way
// ./script.js runs it inside Redis, field for field. A batch is one call of one function, so one
// round trip and one transaction: each row is upserted and locked in the batch's order (the store
// sorts every batch the same way, so two batches never deadlock), brought to the database's clock
// (clock_timestamp() after its lock: a lock wait must not age a grant), granted from and written
// back before the commit.
//
// A row's columns: tokens, at_ms (bucket), win, used (fixed window), records ({ "<lease>": [tokens,
// until ms] }, sliding window), seq (lease ids), holders ({ holder: when its latest lease expires }),
// forget_at (when a fresh state equals it: prune() deletes rows past it; Infinity: never, a bucket
// that does not refill). A second table holds the shared bans (./postgres-bans.js). Arguments: the batch as JSON, one array per request:
//   grant:  [limit, key, alg, a, b, size, ttlMs, holder] -> one [granted, ttlMs, remaining, holders, lease, retryAfterMs] each
//   return: [limit, key, alg, a, b, lease, tokens, reason, holder, idleMs | null]
// with alg 'b' | 'f' | 's' and a, b its numbers (./script.js limitArgs); and lock_ms, the longest a
// row lock is waited for (lock_timeout, set for this transaction only).

/** Marks the functions of this version (a comment on each): another version is replaced on first use. */
const VERSION = 'tiergate lease store 1';

/** `name` as a quoted identifier (callers allow only [a-z0-9_]: the quotes are for reserved words). */
const ident = (name) => `"${name}"`;

/** The names of a store's objects in `schema` with `prefix`. */
function names(schema, prefix) {
  const q = (n) => `${ident(schema)}.${ident(`${prefix}_${n}`)}`;
  return {
    schema: ident(schema), table: q('lease_keys'), forgetIndex: ident(`${prefix}_lease_keys_forget`),
    grant: q('lease_grant'), give: q('lease_return'), bans: q('bans'), channel: `${prefix}_bans`,
  };
}

// Shared by both functions: the row `s` locked, `now` read, expired holders and records dropped, the
// bucket refilled, the window turned (into tokens, w, used).
const ADVANCE = `
    now := extract(epoch from clock_timestamp()) * 1000;
    holders := coalesce((SELECT jsonb_object_agg(h.key, h.value) FROM jsonb_each(s.holders) h WHERE h.value::float8 > now), '{}');
    recs := coalesce((SELECT jsonb_object_agg(x.key, x.value) FROM jsonb_each(s.records) x
      WHERE (x.value->>1)::float8 > now AND (x.value->>0)::float8 > 0), '{}');
    IF alg = 'b' THEN
      tokens := coalesce(s.tokens, b);
      IF s.at_ms IS NOT NULL AND now > s.at_ms THEN tokens := least(b, tokens + (now - s.at_ms) * a / 1000); END IF;
    ELSIF alg = 'f' THEN
      w := floor(now / b);
      used := CASE WHEN s.win = w THEN s.used ELSE 0 END;
    ELSE
      used := coalesce((SELECT sum((x.value->>0)::float8) FROM jsonb_each(recs) x), 0);
    END IF;`;

// When the row is worth nothing more (Redis: the key's PEXPIRE), into forget.
const FORGET = `
    forget := now + coalesce((SELECT max(h.value::float8) - now FROM jsonb_each(holders) h), 0);
    IF alg = 'b' THEN
      forget := CASE WHEN a = 0 THEN 'Infinity'::float8 ELSE greatest(forget, now + ceil((b - tokens) / a * 1000)) END;
    ELSIF alg = 'f' THEN
      forget := greatest(forget, (w + 1) * b);
    ELSE
      forget := greatest(forget, coalesce((SELECT max((x.value->>1)::float8) FROM jsonb_each(recs) x), now));
    END IF;`;

// use_variable: in \`SET used = used\` the right side is the variable (the left is always a column).
const DECLARE = `
#variable_conflict use_variable
DECLARE
  r json; s record; now float8; alg text; a float8; b float8; holder text;
  tokens float8; w float8; used float8; recs jsonb; holders jsonb; forget float8;`;

function schemaSql(n) {
  return `CREATE SCHEMA IF NOT EXISTS ${n.schema};
CREATE TABLE IF NOT EXISTS ${n.table} (
  limit_name text NOT NULL, key text NOT NULL,
  tokens float8, at_ms float8, win float8, used float8,
  records jsonb NOT NULL DEFAULT '{}', seq bigint NOT NULL DEFAULT 0, holders jsonb NOT NULL DEFAULT '{}',
  forget_at float8 NOT NULL DEFAULT 0,
  PRIMARY KEY (limit_name, key));
CREATE INDEX IF NOT EXISTS ${n.forgetIndex} ON ${n.table} (forget_at);
-- The shared bans and lists (lib/cluster/bans.js's hash: field -> sealed entry).
CREATE TABLE IF NOT EXISTS ${n.bans} (field text PRIMARY KEY, entry text NOT NULL);

CREATE OR REPLACE FUNCTION ${n.grant}(batch json, lock_ms int) RETURNS json LANGUAGE plpgsql AS $fn$
${DECLARE}
  size float8; ttl float8; granted float8; remaining float8; lease bigint; retry float8; seq bigint; cnt int;
  out json[] := '{}';
BEGIN
  PERFORM set_config('lock_timeout', lock_ms || 'ms', true);
  FOR r IN SELECT value FROM json_array_elements(batch) LOOP
    alg := r->>2; a := (r->>3)::float8; b := (r->>4)::float8;
    size := (r->>5)::float8; ttl := (r->>6)::float8; holder := r->>7;
    -- The upsert locks the row, new or not, until the commit.
    INSERT INTO ${n.table} AS t (limit_name, key) VALUES (r->>0, r->>1)
      ON CONFLICT (limit_name, key) DO UPDATE SET seq = t.seq RETURNING t.* INTO s;
    ${ADVANCE}
    seq := s.seq; lease := 0; retry := 0;
    IF alg = 'b' THEN
      granted := least(size, floor(tokens));
      tokens := tokens - granted;
      remaining := floor(tokens);
      seq := seq + 1; lease := seq;
      IF remaining = 0 THEN
        -- A bucket that never refills may still get tokens back: ask again after a lease's life.
        retry := CASE WHEN a > 0 THEN ceil((1 - tokens) / a * 1000) ELSE ttl END;
      END IF;
    ELSIF alg = 'f' THEN
      granted := least(size, floor(a) - used);
      used := used + granted;
      remaining := floor(a) - used;
      ttl := least(ttl, (w + 1) * b - now);
      lease := w;
      IF remaining = 0 THEN retry := ceil((w + 1) * b - now); END IF;
    ELSE
      granted := least(size, floor(a) - used);
      remaining := floor(a) - used - granted;
      IF granted > 0 THEN
        seq := seq + 1; lease := seq;
        recs := recs || jsonb_build_object(lease::text, jsonb_build_array(granted, now + ttl + b));
      END IF;
      IF remaining = 0 THEN
        retry := ceil(least(ttl + b, coalesce((SELECT min((x.value->>1)::float8) - now FROM jsonb_each(recs) x), ttl + b)));
      END IF;
    END IF;
    cnt := (SELECT count(*) FROM jsonb_each(holders)) + CASE WHEN holders ? holder THEN 0 ELSE 1 END;
    IF granted > 0 AND (NOT holders ? holder OR (holders->>holder)::float8 < now + ttl) THEN
      holders := holders || jsonb_build_object(holder, now + ttl);
    END IF;
    ${FORGET}
    UPDATE ${n.table} SET tokens = CASE WHEN alg = 'b' THEN tokens END, at_ms = now, win = w, used = used,
      records = recs, seq = seq, holders = holders, forget_at = forget
      WHERE limit_name = r->>0 AND key = r->>1;
    out := out || json_build_array(granted, trunc(ttl), remaining, cnt, lease, retry);
  END LOOP;
  RETURN array_to_json(out);
END $fn$;
COMMENT ON FUNCTION ${n.grant}(json, int) IS '${VERSION}';

CREATE OR REPLACE FUNCTION ${n.give}(batch json, lock_ms int) RETURNS void LANGUAGE plpgsql AS $fn$
${DECLARE}
  lease bigint; n float8; idle float8; rec jsonb; credited float8; until float8;
BEGIN
  PERFORM set_config('lock_timeout', lock_ms || 'ms', true);
  FOR r IN SELECT value FROM json_array_elements(batch) LOOP
    alg := r->>2; a := (r->>3)::float8; b := (r->>4)::float8;
    lease := (r->>5)::bigint; n := (r->>6)::float8; holder := r->>8; idle := (r->>9)::float8;
    SELECT * INTO s FROM ${n.table} WHERE limit_name = r->>0 AND key = r->>1 FOR UPDATE;
    -- No row: a fresh state, to which a return adds nothing (a full bucket, an empty window).
    CONTINUE WHEN NOT FOUND;
    ${ADVANCE}
    IF alg = 'b' THEN
      tokens := tokens + greatest(0, least(n, b - tokens));
    ELSIF alg = 'f' THEN
      IF lease = w THEN used := used - least(n, used); END IF;
    ELSE
      rec := recs->(lease::text);
      IF rec IS NOT NULL THEN
        credited := least(n, (rec->>0)::float8);
        until := (rec->>1)::float8;
        -- Spent from: its spends leave the window one window after the last of them.
        IF idle IS NOT NULL AND now - idle + b < until THEN until := now - idle + b; END IF;
        IF (rec->>0)::float8 - credited > 0 THEN
          recs := recs || jsonb_build_object(lease::text, jsonb_build_array((rec->>0)::float8 - credited, until));
        ELSE
          recs := recs - lease::text;
        END IF;
      END IF;
    END IF;
    IF r->>7 = 'released' THEN holders := holders - holder; END IF;
    ${FORGET}
    UPDATE ${n.table} SET tokens = CASE WHEN alg = 'b' THEN tokens END, at_ms = now, win = w, used = used,
      records = recs, holders = holders, forget_at = forget
      WHERE limit_name = r->>0 AND key = r->>1;
  END LOOP;
END $fn$;
COMMENT ON FUNCTION ${n.give}(json, int) IS '${VERSION}';`;
}

/** One row, `ready`: whether this version's objects exist (then a role without CREATE can use them as they are). */
function readySql(n) {
  const fn = (f) => `obj_description(to_regprocedure('${f}(json, int)'), 'pg_proc') = '${VERSION}'`;
  return `SELECT coalesce(${fn(n.grant)} AND ${fn(n.give)} AND to_regclass('${n.bans}') IS NOT NULL AND to_regclass('${n.table}') IS NOT NULL, false) AS ready`;
}

module.exports = { names, schemaSql, readySql };
