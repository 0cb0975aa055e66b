-- Alert history: one row per state change (firing, resolved) of an alert,
-- written by the service's evaluator; repeats of a firing alert are
-- notifications, not history.
CREATE TABLE alert_events (
    changed_at   TIMESTAMP NOT NULL,  -- when the state was entered (UTC)
    alert_key    VARCHAR   NOT NULL,  -- rule name + instance labels
    rule         VARCHAR   NOT NULL,
    kind         VARCHAR   NOT NULL,
    severity     VARCHAR   NOT NULL,
    labels       VARCHAR   NOT NULL,  -- JSON object
    state        VARCHAR   NOT NULL,  -- firing | resolved
    active_since TIMESTAMP NOT NULL,  -- first breaching evaluation of the episode
    value        DOUBLE,              -- NULL: no data
    threshold    DOUBLE    NOT NULL,
    summary      VARCHAR   NOT NULL,
    details      VARCHAR   NOT NULL   -- JSON: the report figures behind the value
);
