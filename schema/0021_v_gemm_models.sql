-- 0021: v_gemm_models, v_models' twin for the gemm kind: one row per GPU
-- model (the CPU model for CPU runs) and configuration over one-device gemm
-- runs, so the matrix rate of each model stands beside its ResNet-50
-- figure (`gpubench compare --kind gemm`). A gemm's configuration is its
-- shape, C(m x n) = A(m x k) . B(k x n): figures of different shapes are
-- never one group. It reads v_results, as v_models does (a later migration
-- that replaces v_results keeps these columns or replaces this view too).
--   rows: kind 'gemm', status 'done', valid = 1, gflops not NULL, n_gpus = 1
--   and n_nodes = 1 (a gemm runs on one device; the filter keeps a row that
--   says otherwise out). Failed, cancelled and invalid runs are left out.
--   key: gpu_model, backend, precision, m, n, k (a NULL in the key is a
--   group of its own, as GROUP BY has it).
--   runs: how many runs; nodes: on how many distinct nodes;
--   median_gflops: the middle run, or the mean of the two middle ones for an
--   even count (window functions, as v_models); min_gflops, max_gflops: the
--   slowest and fastest run; last_finished_at: the latest run's finished_at.
-- No column of another view changes.
-- And jobs.precision for gemm jobs, which the coordinator left NULL (it
-- kept it for resnet50 only), so that a gemm that failed before its record
-- said its precision shows it in v_results too: the job's parameter, else
-- fp32 (until the precision key, 2026-12-05, the gemm kind ran in fp32
-- only). The coordinator now stores it for new jobs.
UPDATE jobs SET precision = COALESCE(json_extract(params, '$.precision'), 'fp32')
WHERE kind = 'gemm' AND precision IS NULL;

CREATE VIEW v_gemm_models AS
WITH runs AS (
    SELECT gpu_model, backend, precision, m, n, k, node, gflops, finished_at
    FROM v_results
    WHERE kind = 'gemm' AND status = 'done' AND valid = 1
      AND gflops IS NOT NULL AND n_gpus = 1 AND n_nodes = 1
),
ranked AS (
    SELECT *,
           row_number() OVER (g ORDER BY gflops) AS i,
           count(*) OVER g                       AS cnt  -- the whole group
    FROM runs
    WINDOW g AS (PARTITION BY gpu_model, backend, precision, m, n, k)
)
SELECT gpu_model,
       backend,
       precision,
       m,
       n,
       k,
       count(*)                                                     AS runs,
       count(DISTINCT node)                                         AS nodes,
       avg(CASE WHEN i IN ((cnt + 1) / 2, (cnt + 2) / 2) THEN gflops END) AS median_gflops,
       min(gflops)                                                  AS min_gflops,
       max(gflops)                                                  AS max_gflops,
       max(finished_at)                                             AS last_finished_at
FROM ranked
GROUP BY gpu_model, backend, precision, m, n, k;
