'use strict';
// The one Lua script of the Redis store: the lease store contract (lib/quota/store.js,
// src/core/quota/wire.rs) run atomically per (limit, key) inside Redis. One key per call (a hash),
// so in a Redis Cluster every call touches one slot. The clock is Redis's own (TIME): only durations
// cross the wire.
//
// The hash holds the limit's state (bucket: t = tokens, at = ms; fixed window: w = window index,
// u = used; sliding window: r:<id> = "tokens:until" per lease record), seq (lease ids) and, per
// holder, h:<holder> = when its latest lease expires (ms). The key expires when forgetting it loses
// nothing: a bucket once full again, a window once over, never before a holder's lease.
//
// KEYS[1] the hash. ARGV: op, alg ('b' | 'f' | 's'), a (rate | limit), b (burst | windowMs), then
//   lease:   size, ttlMs, holder -> { granted, ttlMs, remaining, holders, lease, retryAfterMs }
//   release: lease, tokens, reason, holder, idleMs ('' if never spent from) -> credited tokens
// and the operators' calls (./limits-admin.js), which grant nothing:
//   peek                 -> { limit, remaining, resetMs, overridden (0 | 1) }
//   reset                -> 1 if the key had counted anything: its count cleared, its override kept
//   refund: tokens       -> tokens credited (never beyond the limit)
//   override: oa, ob, limit -> 1; unoverride -> 1 if there was one
// An override (fields oa, ob: the a and b the key counts with; ol: the limit as given) replaces a and
// b for every call on the key, and keeps the key from expiring. A reset stores z, the last lease id
// (a fixed window: the window) it cleared: a return of a lease at or below z credits nothing, since
// the reset already gave its tokens back.
const LUA = `
local k = KEYS[1]
local op, alg = ARGV[1], ARGV[2]
local a, b = tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
-- Milliseconds with their fraction: a window's remainder computed from a rounded-down instant would
-- let a lease outlive its window by up to 1 ms. Durations go back truncated (the safe direction).
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local fields = redis.call('HGETALL', k)
local st, recs, holders = {}, {}, {}
for i = 1, #fields, 2 do
  local f, v = fields[i], fields[i + 1]
  local p = string.sub(f, 1, 2)
  if p == 'h:' then
    if tonumber(v) > now then holders[string.sub(f, 3)] = tonumber(v) else redis.call('HDEL', k, f) end
  elseif p == 'r:' then
    local sep = string.find(v, ':', 1, true)
    local n, u = tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
    if u > now and n > 0 then recs[string.sub(f, 3)] = { n, u } else redis.call('HDEL', k, f) end
  else
    st[f] = v
  end
end
if st.oa then a, b = tonumber(st.oa), tonumber(st.ob) end
local function num(x) return string.format('%.17g', x) end
-- The bucket's tokens now and the instant they are for (never moved back: a clock that steps back,
-- e.g. after a failover, must not refill the same span twice); the fixed window's index and use.
local tokens, at, w, used = 0, now, 0, 0
if alg == 'b' then
  tokens = tonumber(st.t) or b
  at = tonumber(st.at) or now
  if now > at then tokens = math.min(b, tokens + (now - at) * a / 1000); at = now end
elseif alg == 'f' then
  -- A clock behind the window counted in (a step back) counts in that window, not an earlier one.
  w = math.floor(now / b)
  local sw = tonumber(st.w)
  if sw and sw >= w then w = sw; used = tonumber(st.u) end
else
  for _, r in pairs(recs) do used = used + r[1] end
end
local function keep(extra)
  local ms = extra
  for _, e in pairs(holders) do if e - now > ms then ms = e - now end end
  if st.oa or (alg == 'b' and a == 0) then redis.call('PERSIST', k) return end
  if alg == 'b' then
    local full = math.ceil((b - tokens) / a * 1000 + (at - now))
    if full > ms then ms = full end
  elseif alg == 'f' then
    local left = (w + 1) * b - now
    if left > ms then ms = left end
  else
    for _, r in pairs(recs) do if r[2] - now > ms then ms = r[2] - now end end
  end
  redis.call('PEXPIRE', k, math.max(1, math.ceil(ms)))
end
local cap = alg == 'b' and b or math.floor(a)
if op == 'peek' then
  local remaining, reset = 0, 0
  if alg == 'b' then
    remaining = math.floor(tokens)
    if a > 0 then reset = math.ceil((b - tokens) / a * 1000) end
  elseif alg == 'f' then
    remaining = cap - used
    if used > 0 then reset = math.ceil((w + 1) * b - now) end
  else
    remaining = cap - used
    for _, r in pairs(recs) do if reset == 0 or r[2] - now < reset then reset = math.ceil(r[2] - now) end end
  end
  return { cap, math.max(0, remaining), reset, st.oa and 1 or 0 }
end
if op == 'override' then
  redis.call('HSET', k, 'oa', ARGV[5], 'ob', ARGV[6], 'ol', ARGV[7])
  redis.call('PERSIST', k)
  return 1
end
if op == 'unoverride' then
  if not st.oa then return 0 end
  redis.call('HDEL', k, 'oa', 'ob', 'ol')
  st.oa = nil
  a, b = tonumber(ARGV[3]), tonumber(ARGV[4])
  if alg == 'b' then tokens = math.min(tokens, b) end
  keep(0)
  return 1
end
if op == 'reset' then
  local had = (alg == 'b' and tokens < b) or used > 0
  local floor = alg == 'f' and w or (tonumber(st.seq) or 0)
  for f in pairs(recs) do redis.call('HDEL', k, 'r:' .. f) end
  recs = {}
  redis.call('HDEL', k, 't', 'at', 'w', 'u')
  redis.call('HSET', k, 'z', floor)
  tokens, used = b, 0
  keep(0)
  return had and 1 or 0
end
if op == 'refund' then
  local n = tonumber(ARGV[5])
  local credited = 0
  if alg == 'b' then
    credited = math.max(0, math.min(n, b - tokens))
    redis.call('HSET', k, 't', num(tokens + credited), 'at', num(now))
    tokens = tokens + credited
  elseif alg == 'f' then
    credited = math.min(n, used)
    if tonumber(st.w) == w then redis.call('HSET', k, 'u', used - credited) end
  else
    -- From the records that end last: what was counted most recently goes back first.
    local ids = {}
    for id in pairs(recs) do ids[#ids + 1] = id end
    table.sort(ids, function(x, y) return recs[x][2] > recs[y][2] end)
    for _, id in ipairs(ids) do
      if credited >= n then break end
      local r = recs[id]
      local c = math.min(n - credited, r[1])
      credited = credited + c
      r[1] = r[1] - c
      if r[1] > 0 then redis.call('HSET', k, 'r:' .. id, r[1] .. ':' .. num(r[2])) else redis.call('HDEL', k, 'r:' .. id); recs[id] = nil end
    end
  end
  if redis.call('EXISTS', k) == 1 then keep(0) end
  return math.floor(credited)
end
if op == 'release' then
  local lease, n, reason, holder, idle = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8], tonumber(ARGV[9])
  local credited = 0
  -- A lease from before a reset: the reset gave its tokens back already.
  if st.z and lease <= tonumber(st.z) then n = 0 end
  if alg == 'b' then
    credited = math.min(n, b - tokens)
    if credited < 0 then credited = 0 end
    tokens = tokens + credited
    redis.call('HSET', k, 't', num(tokens), 'at', num(at))
  elseif alg == 'f' then
    if tonumber(st.w) == lease then
      credited = math.min(n, used)
      used = used - credited
      redis.call('HSET', k, 'u', used)
    end
  else
    local r = recs[tostring(lease)]
    if r then
      credited = math.min(n, r[1])
      r[1] = r[1] - credited
      -- Spent from: its spends leave the window one window after the last of them.
      if idle and now - idle + b < r[2] then r[2] = now - idle + b end
      if r[1] > 0 then redis.call('HSET', k, 'r:' .. lease, r[1] .. ':' .. num(r[2])) else redis.call('HDEL', k, 'r:' .. lease); recs[tostring(lease)] = nil end
    end
  end
  if reason == 'released' and holders[holder] then
    holders[holder] = nil
    redis.call('HDEL', k, 'h:' .. holder)
  end
  if redis.call('EXISTS', k) == 1 then keep(0) end
  return math.floor(credited)
end
local size, ttl, holder = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local granted, remaining, lease, retry = 0, 0, 0, 0
if alg == 'b' then
  granted = math.min(size, math.floor(tokens))
  tokens = tokens - granted
  remaining = math.floor(tokens)
  lease = redis.call('HINCRBY', k, 'seq', 1)
  redis.call('HSET', k, 't', num(tokens), 'at', num(at))
  if remaining == 0 then
    -- A bucket that never refills may still get tokens back: ask again after a lease's life.
    if a > 0 then retry = math.ceil((1 - tokens) / a * 1000) else retry = ttl end
  end
elseif alg == 'f' then
  granted = math.min(size, cap - used)
  used = used + granted
  remaining = cap - used
  local left = (w + 1) * b - now
  if left < ttl then ttl = left end
  lease = w
  redis.call('HSET', k, 'w', w, 'u', used)
  if remaining == 0 then retry = math.ceil(left) end
else
  granted = math.min(size, cap - used)
  remaining = cap - used - granted
  if granted > 0 then
    lease = redis.call('HINCRBY', k, 'seq', 1)
    recs[tostring(lease)] = { granted, now + ttl + b }
    redis.call('HSET', k, 'r:' .. lease, granted .. ':' .. num(now + ttl + b))
  end
  if remaining == 0 then
    retry = ttl + b
    for _, r in pairs(recs) do if r[2] - now < retry then retry = r[2] - now end end
    retry = math.ceil(retry)
  end
end
local count = 0
for _ in pairs(holders) do count = count + 1 end
if not holders[holder] then count = count + 1 end
if granted > 0 then
  local e = now + ttl
  if not holders[holder] or holders[holder] < e then
    holders[holder] = e
    redis.call('HSET', k, 'h:' .. holder, num(e))
  end
end
if redis.call('EXISTS', k) == 1 then keep(0) end
return { granted, ttl, remaining, count, lease, retry }
`;

/** The algorithm's code in the script. */
const ALG = Object.freeze({ 'token-bucket': 'b', 'fixed-window': 'f', 'sliding-window': 's' });

/** ARGV[2..4] for a limit spec. */
function limitArgs(spec) {
  const code = ALG[spec.algorithm];
  // The script's bucket refills in tokens per second (the spec says limit per windowMs).
  return code === 'b' ? [code, (spec.limit * 1000) / spec.windowMs, spec.burst] : [code, spec.limit, spec.windowMs];
}

module.exports = { LUA, limitArgs };
