-- 0004_telemetry.sql: GPU and CPU telemetry over each result's timed window
-- (agent/telemetry.h, docs/telemetry.md).
--
-- The agent samples while a job runs, cuts the samples to the window the
-- record names (timed_window_ms), and puts them in the record under
-- "telemetry": per-sample rows, a per-GPU (or CPU) summary over every
-- sample of the window, and the verdict (a throttled GPU, or other
-- processes taking a large share of the CPU, makes the record invalid and
-- says why in invalid_reason). The triggers below copy the rows into
-- tables as the result is committed; a resend of a stored result inserts
-- nothing (ON CONFLICT DO NOTHING fires no trigger), so each result's rows
-- are stored once. The summaries are read from the record by the views.

-- telemetry (0001) gets the two readings it lacked. t_ms counts from the
-- window's start; a row may stand for several samples of a long run
-- (record key telemetry.kept_every), its throttle_reasons their union.
ALTER TABLE telemetry ADD COLUMN mem_used_bytes INTEGER;
ALTER TABLE telemetry ADD COLUMN power_limit_w REAL;  -- the enforced limit

-- CPU jobs: per sample, over the interval since the previous one, as % of
-- all the node's CPU time: others_pct (other processes), steal_pct (the
-- hypervisor), worker_pct (the job's own worker).
CREATE TABLE telemetry_cpu (
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    t_ms        INTEGER NOT NULL,                  -- since the timed window began
    cpu_mhz     REAL,
    others_pct  REAL,
    steal_pct   REAL,
    worker_pct  REAL,
    PRIMARY KEY (job_id, attempt, t_ms),
    FOREIGN KEY (job_id, attempt) REFERENCES results (job_id, attempt)
);

CREATE TRIGGER results_telemetry AFTER INSERT ON results
WHEN NEW.record IS NOT NULL AND json_type(NEW.record, '$.telemetry.samples') = 'array'
BEGIN
    INSERT INTO telemetry (job_id, attempt, gpu_idx, t_ms, sm_clock_mhz, mem_clock_mhz, power_w,
                           temp_c, util_pct, throttle_reasons, mem_used_bytes, power_limit_w)
    SELECT NEW.job_id, NEW.attempt,
           json_extract(s.value, '$[0]'), json_extract(s.value, '$[1]'),
           json_extract(s.value, '$[2]'), json_extract(s.value, '$[3]'),
           json_extract(s.value, '$[4]'), json_extract(s.value, '$[5]'),
           json_extract(s.value, '$[6]'), json_extract(s.value, '$[8]'),
           json_extract(s.value, '$[7]'), json_extract(s.value, '$[9]')
    FROM json_each(NEW.record, '$.telemetry.samples') AS s
    WHERE json_extract(NEW.record, '$.telemetry.source') = 'nvml';
    INSERT INTO telemetry_cpu (job_id, attempt, t_ms, cpu_mhz, others_pct, steal_pct, worker_pct)
    SELECT NEW.job_id, NEW.attempt,
           json_extract(s.value, '$[0]'), json_extract(s.value, '$[1]'),
           json_extract(s.value, '$[2]'), json_extract(s.value, '$[3]'),
           json_extract(s.value, '$[4]')
    FROM json_each(NEW.record, '$.telemetry.samples') AS s
    WHERE json_extract(NEW.record, '$.telemetry.source') = 'proc';
END;

-- Per result and GPU: the summary over the timed window. reasons are every
-- clocks-event reason seen, throttle_reasons those that count as
-- throttling (docs/telemetry.md); throttled = 1 when there were any.
CREATE VIEW v_telemetry AS
SELECT j.sweep_id,
       r.job_id,
       r.attempt,
       n.name                                                       AS node,
       r.device_model                                               AS gpu_model,
       r.kind,
       json_extract(g.value, '$.gpu')                               AS gpu,
       json_extract(g.value, '$.samples')                           AS samples,
       json_extract(g.value, '$.sm_mhz.median')                     AS sm_clock_median_mhz,
       json_extract(g.value, '$.sm_mhz.min')                        AS sm_clock_min_mhz,
       json_extract(g.value, '$.mem_mhz.median')                    AS mem_clock_median_mhz,
       json_extract(g.value, '$.temp_c.max')                        AS temp_max_c,
       json_extract(g.value, '$.power_w.median')                    AS power_median_w,
       json_extract(g.value, '$.power_w.max')                       AS power_max_w,
       json_extract(g.value, '$.power_limit_w')                     AS power_limit_w,
       json_extract(g.value, '$.util_pct.median')                   AS util_median_pct,
       json_extract(g.value, '$.mem_used_bytes.max')                AS mem_used_max_bytes,
       (SELECT group_concat(value, ',') FROM json_each(g.value, '$.reason_names'))   AS reasons,
       (SELECT group_concat(value, ',') FROM json_each(g.value, '$.throttle_names')) AS throttle_reasons,
       json_extract(g.value, '$.throttled_samples') > 0             AS throttled,
       r.valid,
       r.invalid_reason
FROM results r
JOIN json_each(r.record, '$.telemetry.gpus') AS g
JOIN jobs j ON j.job_id = r.job_id
LEFT JOIN attempts a ON a.job_id = r.job_id AND a.attempt = r.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE r.record IS NOT NULL AND json_type(r.record, '$.telemetry.gpus') = 'array';

-- Per result of a CPU job: what others took of the node's CPU time in the
-- timed window (flagged above 5%, invalid above 10%: docs/telemetry.md).
CREATE VIEW v_cpu_telemetry AS
SELECT j.sweep_id,
       r.job_id,
       r.attempt,
       n.name                                                       AS node,
       r.device_model                                               AS cpu_model,
       r.kind,
       json_extract(r.record, '$.telemetry.cores')                  AS cores,
       json_extract(r.record, '$.telemetry.cpu.others_pct')         AS others_pct,
       json_extract(r.record, '$.telemetry.cpu.steal_pct')          AS steal_pct,
       json_extract(r.record, '$.telemetry.cpu.taken_pct')          AS taken_pct,
       json_extract(r.record, '$.telemetry.cpu.worker_pct')         AS worker_pct,
       json_extract(r.record, '$.telemetry.cpu.cpu_mhz.median')     AS cpu_mhz_median,
       json_extract(r.record, '$.telemetry.cpu.flagged')            AS flagged,
       r.valid,
       r.invalid_reason
FROM results r
JOIN jobs j ON j.job_id = r.job_id
LEFT JOIN attempts a ON a.job_id = r.job_id AND a.attempt = r.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE r.record IS NOT NULL AND json_extract(r.record, '$.telemetry.source') = 'proc';

-- v_results of 0002 with three columns more at the end: valid and
-- invalid_reason (the record's verdict: spread, throttling, contention)
-- and telemetry_flag (a short line when the telemetry invalidated or
-- flagged the result, or was incomplete; NULL otherwise).
DROP VIEW v_results;
CREATE VIEW v_results AS
SELECT j.sweep_id,
       j.job_id,
       n.name                                         AS node,
       COALESCE(r.device_model, n.gpu_model)          AS gpu_model,
       COALESCE(r.backend, a.backend, j.backend)      AS backend,
       j.kind,
       COALESCE(r.n_devices, j.n_gpus * COALESCE(json_extract(j.params, '$.n_nodes'), 1))
                                                      AS n_gpus,
       COALESCE(r.precision, j.precision)             AS precision,
       j.batch_per_gpu,
       COALESCE(json_extract(r.record, '$.interconnect'), j.interconnect) AS interconnect,
       r.images_per_sec,
       r.step_ms_median,
       r.step_ms_p90,
       j.state                                        AS status,
       j.error,
       j.finished_at,
       j.synthetic,
       j.attempt,
       r.gflops,
       COALESCE(json_extract(j.params, '$.n_nodes'), 1) AS n_nodes,
       COALESCE((SELECT group_concat(name, ',') FROM
                    (SELECT kn.name FROM ranks k JOIN nodes kn ON kn.agent_id = k.agent_id
                     WHERE k.job_id = j.job_id AND k.attempt = j.attempt ORDER BY k.rank)),
                n.name)                               AS nodes,
       (SELECT group_concat(transport, ',') FROM v_transports t
        WHERE t.job_id = j.job_id AND t.attempt = j.attempt) AS nccl_transports,
       r.valid,
       r.invalid_reason,
       json_extract(r.record, '$.telemetry.flag')     AS telemetry_flag
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');
