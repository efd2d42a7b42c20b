-- 0001_init.sql: the first schema of the gpubench store.
--
-- Times are ISO 8601 UTC text ("2024-05-01T12:00:00.123Z") written by the
-- coordinator. JSON columns (inventory, params, spec, record) hold the whole
-- object so json_extract() answers questions no column was made for.
-- Tables are the coordinator's; the views (v_*) are the public interface for
-- sqlite3 users and keep their columns stable across migrations.

CREATE TABLE nodes (
    agent_id            TEXT PRIMARY KEY,
    name                TEXT NOT NULL,
    state               TEXT NOT NULL CHECK (state IN ('connected', 'disconnected', 'lost')),
    cpu_model           TEXT NOT NULL DEFAULT '',
    cpu_cores           INTEGER NOT NULL DEFAULT 0,
    memory_bytes        INTEGER NOT NULL DEFAULT 0,
    os                  TEXT NOT NULL DEFAULT '',
    kernel              TEXT NOT NULL DEFAULT '',
    driver_version      TEXT NOT NULL DEFAULT '',
    cuda_driver_version TEXT NOT NULL DEFAULT '',
    n_gpus              INTEGER NOT NULL DEFAULT 0,
    gpu_model           TEXT NOT NULL DEFAULT '',  -- first GPU's name; the CPU model on a CPU node
    labels              TEXT NOT NULL DEFAULT '',  -- "k=v,k=v"
    kinds               TEXT NOT NULL DEFAULT '',  -- job kinds the node's worker runs
    slots               INTEGER NOT NULL DEFAULT 1,
    has_nvlink          INTEGER NOT NULL DEFAULT 0,
    inventory           TEXT NOT NULL DEFAULT '{}', -- JSON: everything the agent reported
    first_seen          TEXT NOT NULL,
    last_seen           TEXT NOT NULL
);

CREATE TABLE gpus (
    agent_id       TEXT NOT NULL REFERENCES nodes (agent_id) ON DELETE CASCADE,
    idx            INTEGER NOT NULL,
    name           TEXT NOT NULL,
    uuid           TEXT NOT NULL DEFAULT '',
    memory_bytes   INTEGER NOT NULL DEFAULT 0,
    sm_count       INTEGER NOT NULL DEFAULT 0,  -- 0: NVML could not tell
    cc_major       INTEGER NOT NULL DEFAULT 0,
    cc_minor       INTEGER NOT NULL DEFAULT 0,
    pcie_gen       INTEGER NOT NULL DEFAULT 0,
    pcie_width     INTEGER NOT NULL DEFAULT 0,
    power_limit_w  REAL,
    pci_bus_id     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, idx)
);

-- One row per unordered GPU pair of a node (gpu_a < gpu_b).
CREATE TABLE links (
    agent_id      TEXT NOT NULL REFERENCES nodes (agent_id) ON DELETE CASCADE,
    gpu_a         INTEGER NOT NULL,
    gpu_b         INTEGER NOT NULL,
    nvlink_lanes  INTEGER NOT NULL DEFAULT 0,
    pcie_path     TEXT NOT NULL DEFAULT 'unknown'
        CHECK (pcie_path IN ('same_board', 'single_switch', 'multi_switch', 'host_bridge',
                             'numa_node', 'cross_socket', 'unknown')),
    PRIMARY KEY (agent_id, gpu_a, gpu_b),
    CHECK (gpu_a < gpu_b)
);

CREATE TABLE sweeps (
    sweep_id     INTEGER PRIMARY KEY,
    name         TEXT NOT NULL DEFAULT '',
    spec         TEXT NOT NULL,               -- the spec as submitted
    n_jobs       INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
    created_at   TEXT NOT NULL,
    finished_at  TEXT
);

CREATE TABLE jobs (
    job_id         INTEGER PRIMARY KEY,
    sweep_id       INTEGER NOT NULL REFERENCES sweeps (sweep_id),
    seq            INTEGER NOT NULL,          -- position in the sweep's expansion
    kind           TEXT NOT NULL,
    params         TEXT NOT NULL,             -- JSON (docs/control-plane.md)
    backend        TEXT NOT NULL,             -- as asked: auto | cpu | cuda
    n_gpus         INTEGER NOT NULL,
    precision      TEXT,
    batch_per_gpu  INTEGER,
    interconnect   TEXT,
    synthetic      INTEGER NOT NULL DEFAULT 0, -- 1: a control-plane test kind (sleep)
    state          TEXT NOT NULL
        CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    attempt        INTEGER NOT NULL DEFAULT 0, -- current (last) attempt; 0 before the first
    max_attempts   INTEGER NOT NULL,
    agent_id       TEXT,                       -- while running
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    error          TEXT,
    created_at     TEXT NOT NULL,
    finished_at    TEXT,
    UNIQUE (sweep_id, seq)
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_sweep ON jobs (sweep_id, state);

CREATE TABLE attempts (
    job_id       INTEGER NOT NULL REFERENCES jobs (job_id),
    attempt      INTEGER NOT NULL,
    agent_id     TEXT NOT NULL REFERENCES nodes (agent_id),
    backend      TEXT NOT NULL,               -- as placed: cpu | cuda
    state        TEXT NOT NULL
        CHECK (state IN ('assigned', 'running', 'done', 'failed', 'lost', 'cancelled',
                         'superseded')),
    assigned_at  TEXT NOT NULL,
    started_at   TEXT,
    ended_at     TEXT,
    error        TEXT,
    PRIMARY KEY (job_id, attempt)
);

-- One row per (job, attempt) that reported; a resend never adds a row.
CREATE TABLE results (
    job_id          INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    agent_id        TEXT NOT NULL,
    status          TEXT NOT NULL
        CHECK (status IN ('ok', 'failed', 'timeout', 'crashed', 'cancelled')),
    kind            TEXT NOT NULL,
    backend         TEXT,
    device_model    TEXT,
    n_devices       INTEGER,
    precision       TEXT,
    images_per_sec  REAL,
    step_ms_median  REAL,
    step_ms_p90     REAL,
    gflops          REAL,
    valid           INTEGER,
    invalid_reason  TEXT,
    synthetic       INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    exit_code       INTEGER,
    output_tail     TEXT,
    record          TEXT,                     -- JSON result record (docs/result-record.md)
    started_at      TEXT,
    finished_at     TEXT,
    committed_at    TEXT NOT NULL,
    PRIMARY KEY (job_id, attempt),
    FOREIGN KEY (job_id, attempt) REFERENCES attempts (job_id, attempt)
);

-- Per timed step of a result (resnet50).
CREATE TABLE samples (
    job_id   INTEGER NOT NULL,
    attempt  INTEGER NOT NULL,
    step     INTEGER NOT NULL,
    step_ms  REAL,
    loss     REAL,
    PRIMARY KEY (job_id, attempt, step),
    FOREIGN KEY (job_id, attempt) REFERENCES results (job_id, attempt)
);

-- GPU telemetry over the timed window of a result.
CREATE TABLE telemetry (
    job_id            INTEGER NOT NULL,
    attempt           INTEGER NOT NULL,
    gpu_idx           INTEGER NOT NULL,
    t_ms              INTEGER NOT NULL,       -- since the timed window began
    sm_clock_mhz      INTEGER,
    mem_clock_mhz     INTEGER,
    power_w           REAL,
    temp_c            INTEGER,
    util_pct          INTEGER,
    throttle_reasons  INTEGER,
    PRIMARY KEY (job_id, attempt, gpu_idx, t_ms),
    FOREIGN KEY (job_id, attempt) REFERENCES results (job_id, attempt)
);

-- One row per finished job (done, failed or cancelled), with the result of
-- the attempt that ended it.
CREATE VIEW v_results AS
SELECT j.sweep_id,
       j.job_id,
       n.name                                         AS node,
       COALESCE(r.device_model, n.gpu_model)          AS gpu_model,
       COALESCE(r.backend, a.backend, j.backend)      AS backend,
       j.kind,
       COALESCE(r.n_devices, j.n_gpus)                AS n_gpus,
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
       r.gflops
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');

-- One row per agent ever seen.
CREATE VIEW v_nodes AS
SELECT name AS node, agent_id, state, cpu_model, n_gpus, gpu_model, labels, last_seen
FROM nodes;
