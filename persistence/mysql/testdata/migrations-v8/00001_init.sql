-- dagflow schema, MySQL 8 / MariaDB 10.6+ (InnoDB).
--
-- Names, ids and statuses are ASCII with binary collation (small,
-- collation-free indexes); payloads are LONGBLOB so they round-trip
-- byte-exact; messages are utf8mb4. Times are DATETIME(6) in UTC.

-- +goose Up
CREATE TABLE workflow_runs (
    id              VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version         INT NOT NULL DEFAULT 0,
    status          VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    input           LONGBLOB NULL,
    output          LONGBLOB NULL,
    error           MEDIUMTEXT NULL,
    idempotency_key VARBINARY(255) NULL,
    metadata        LONGBLOB NULL,
    schedule        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    scheduled_tick  DATETIME(6) NULL,
    start_at        DATETIME(6) NOT NULL,
    created_at      DATETIME(6) NOT NULL,
    started_at      DATETIME(6) NULL,
    finished_at     DATETIME(6) NULL,
    updated_at      DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_runs_idempotency (workflow, idempotency_key),
    KEY idx_runs_status_start (status, start_at),
    KEY idx_runs_created (created_at, id),
    KEY idx_runs_wf_created (workflow, created_at, id),
    KEY idx_runs_status_created (status, created_at, id),
    KEY idx_runs_wf_status_created (workflow, status, created_at, id),
    KEY idx_runs_finished (finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE step_runs (
    run_id           VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    step             VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq              INT NOT NULL,
    workflow         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status           VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    deps             TEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    dependents       TEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempt          INT NOT NULL DEFAULT 0,
    max_attempts     INT NOT NULL DEFAULT 0,
    pending_deps     INT NOT NULL DEFAULT 0,
    comp_attempt     INT NOT NULL DEFAULT 0,
    fence            VARBINARY(128) NOT NULL DEFAULT '',
    lease_expires_at DATETIME(6) NULL,
    next_attempt_at  DATETIME(6) NULL,
    output           LONGBLOB NULL,
    error            MEDIUMTEXT NULL,
    queued_at        DATETIME(6) NULL,
    started_at       DATETIME(6) NULL,
    finished_at      DATETIME(6) NULL,
    updated_at       DATETIME(6) NOT NULL,
    PRIMARY KEY (run_id, step),
    KEY idx_steps_status_queued (status, queued_at),
    KEY idx_steps_status_next (status, next_attempt_at),
    KEY idx_steps_status_lease (status, lease_expires_at),
    KEY idx_steps_status_finished (status, finished_at, run_id, step),
    KEY idx_steps_status_wf_finished (status, workflow, finished_at, run_id, step),
    CONSTRAINT fk_steps_run FOREIGN KEY (run_id) REFERENCES workflow_runs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE step_attempts (
    id          BIGINT NOT NULL AUTO_INCREMENT,
    run_id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    step        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempt     INT NOT NULL,
    worker      VARCHAR(255) NOT NULL,
    fence       VARBINARY(128) NOT NULL,
    outcome     VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    error       MEDIUMTEXT NULL,
    started_at  DATETIME(6) NOT NULL,
    finished_at DATETIME(6) NULL,
    PRIMARY KEY (id),
    KEY idx_attempts_run (run_id, id),
    KEY idx_attempts_step (run_id, step, fence),
    CONSTRAINT fk_attempts_step FOREIGN KEY (run_id, step) REFERENCES step_runs (run_id, step) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE schedules (
    name               VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    spec               VARCHAR(255) NOT NULL,
    time_zone          VARCHAR(255) NOT NULL DEFAULT '',
    workflow           VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    input              LONGBLOB NULL,
    overlap_policy     VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    catch_up           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    catch_up_window_us BIGINT NOT NULL DEFAULT 0,
    paused             BOOLEAN NOT NULL DEFAULT FALSE,
    disabled           BOOLEAN NOT NULL DEFAULT FALSE,
    last_tick          DATETIME(6) NULL,
    created_at         DATETIME(6) NOT NULL,
    updated_at         DATETIME(6) NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE schedule_ticks (
    schedule   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tick       DATETIME(6) NOT NULL,
    outcome    VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    run_id     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    reason     MEDIUMTEXT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (schedule, tick)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE schedule_ticks;
DROP TABLE schedules;
DROP TABLE step_attempts;
DROP TABLE step_runs;
DROP TABLE workflow_runs;
