-- One history format: attempts in progress live on their step rows.
--
-- Since 00005 a claim writes the running attempt's worker and start on its
-- step row, and the attempt's row is written once, when it ends. Steps
-- claimed by an earlier version and still running have instead a row
-- with outcome 'running' and a step row without claimed_at, which every
-- path had to tell apart. This moves each such attempt onto its step row
-- (its start and worker) and deletes its row, so that only the one format
-- is left. Rows with outcome 'running' of steps no longer running (an
-- attempt cut short by a cancel) are history as it is and stay.

-- +goose Up
UPDATE step_runs s
    JOIN step_attempts a ON a.run_id = s.run_id AND a.step = s.step
        AND a.kind = 'step' AND a.outcome = 'running' AND a.fence = s.fence
SET s.claimed_at = a.started_at, s.worker = a.worker
WHERE s.status = 'running' AND s.claimed_at IS NULL AND s.fence <> '';

DELETE a FROM step_attempts a
    JOIN step_runs s ON s.run_id = a.run_id AND s.step = a.step
        AND s.status = 'running' AND s.fence = a.fence AND s.claimed_at = a.started_at
WHERE a.kind = 'step' AND a.outcome = 'running' AND a.fence <> '';

-- +goose Down
-- The attempts stay on their step rows, which every version since 00005 reads.
SELECT 1;
