-- 0003: reserved for the hardening branch (issue 6), which owns migration
-- 3. This placeholder only keeps the numbers without a gap on the
-- telemetry branch; the lead drops it when hardening's 0003 is merged.
SELECT 1;
