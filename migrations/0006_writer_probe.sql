-- One row the writer rewrites after a failed commit (a full disk, say), to
-- learn when writing works again without waiting for a client's records:
-- /readyz turns ready on that write (ARCHITECTURE.md, "Storage faults").
CREATE TABLE writer_probe (
    written_at TIMESTAMPTZ NOT NULL
);
