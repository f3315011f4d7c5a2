-- One history format: attempts in progress live on their step rows (see
-- the MySQL migration 00006 for why). Each running step claimed by an
-- earlier version gets its attempt's start and worker from the attempt's
-- 'running' row, and the row goes.

-- +goose Up
UPDATE step_runs
SET claimed_at = (SELECT a.started_at FROM step_attempts a
        WHERE a.run_id = step_runs.run_id AND a.step = step_runs.step
            AND a.kind = 'step' AND a.outcome = 'running' AND a.fence = step_runs.fence),
    worker = (SELECT a.worker FROM step_attempts a
        WHERE a.run_id = step_runs.run_id AND a.step = step_runs.step
            AND a.kind = 'step' AND a.outcome = 'running' AND a.fence = step_runs.fence)
WHERE status = 'running' AND claimed_at IS NULL AND fence <> ''
    AND EXISTS (SELECT 1 FROM step_attempts a
        WHERE a.run_id = step_runs.run_id AND a.step = step_runs.step
            AND a.kind = 'step' AND a.outcome = 'running' AND a.fence = step_runs.fence);

DELETE FROM step_attempts
WHERE kind = 'step' AND outcome = 'running' AND fence <> ''
    AND EXISTS (SELECT 1 FROM step_runs s
        WHERE s.run_id = step_attempts.run_id AND s.step = step_attempts.step
            AND s.status = 'running' AND s.fence = step_attempts.fence
            AND s.claimed_at = step_attempts.started_at);

-- +goose Down
-- The attempts stay on their step rows, which every version since 00004 reads.
SELECT 1;
