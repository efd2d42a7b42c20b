-- 0019: v_models, one row per GPU model (the CPU model for CPU runs) and
-- configuration over one-GPU ResNet-50 runs, as GPU buying guides compare
-- models: images/s of one device, each precision, batch and image size
-- apart. It reads v_results (the same gpu_model, n_gpus and n_nodes as
-- `gpubench results` shows): a later migration that replaces v_results
-- keeps these columns or replaces v_models too.
--   rows: kind 'resnet50', status 'done', valid = 1, images_per_sec not
--   NULL, n_gpus = 1 and n_nodes = 1 (one device of one node; a
--   data-parallel or multi-node run is v_scaling's). Failed, cancelled,
--   invalid, multi-GPU and multi-node runs are left out.
--   key: gpu_model, backend, precision, batch_per_gpu, image_size (a NULL
--   in the key is a group of its own, as GROUP BY has it).
--   runs: how many runs; nodes: on how many distinct nodes;
--   median_images_per_sec: the middle run, or the mean of the two middle
--   ones for an even count (computed here with window functions, as
--   v_scaling's baselines); min_images_per_sec, max_images_per_sec: the
--   slowest and fastest run; last_finished_at: the latest run's finished_at.
-- No column of another view changes.
CREATE VIEW v_models AS
WITH runs AS (
    SELECT gpu_model, backend, precision, batch_per_gpu, image_size, node,
           images_per_sec, finished_at
    FROM v_results
    WHERE kind = 'resnet50' AND status = 'done' AND valid = 1
      AND images_per_sec IS NOT NULL AND n_gpus = 1 AND n_nodes = 1
),
ranked AS (
    SELECT *,
           row_number() OVER (g ORDER BY images_per_sec) AS i,
           count(*) OVER g                               AS cnt  -- the whole group
    FROM runs
    WINDOW g AS (PARTITION BY gpu_model, backend, precision, batch_per_gpu, image_size)
)
SELECT gpu_model,
       backend,
       precision,
       batch_per_gpu,
       image_size,
       count(*)                                                          AS runs,
       count(DISTINCT node)                                              AS nodes,
       avg(CASE WHEN i IN ((cnt + 1) / 2, (cnt + 2) / 2) THEN images_per_sec END)
                                                                         AS median_images_per_sec,
       min(images_per_sec)                                               AS min_images_per_sec,
       max(images_per_sec)                                               AS max_images_per_sec,
       max(finished_at)                                                  AS last_finished_at
FROM ranked
GROUP BY gpu_model, backend, precision, batch_per_gpu, image_size;
