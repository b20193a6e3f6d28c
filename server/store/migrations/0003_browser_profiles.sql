-- People's own browser profiles (their logins), kept in the gateway's data dir and lent to one
-- of their own agents at a time. The database itself enforces the lending rules:
--   * a profile is lent to at most one agent (one lent_to column), and an agent uses at most
--     one lent profile (lent_to UNIQUE; NULLs do not collide);
--   * only to an agent of the profile's owner: (lent_to, lent_owner) references the agent's
--     (id, owner_id) and the CHECK ties lent_owner to owner_id;
--   * deleting the agent returns the profile (ON DELETE SET NULL clears both columns);
--     deleting the owner deletes their profiles (the gateway removes their directories).
CREATE UNIQUE INDEX IF NOT EXISTS agents_id_owner ON agents (id, owner_id);
CREATE TABLE IF NOT EXISTS browser_profiles (
    id         TEXT   NOT NULL PRIMARY KEY,
    owner_id   TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    lent_to    TEXT   NULL UNIQUE,
    lent_owner TEXT   NULL,
    lent_at    BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (lent_to, lent_owner) REFERENCES agents (id, owner_id) ON DELETE SET NULL,
    CHECK ((lent_to IS NULL AND lent_owner IS NULL)
        OR (lent_to IS NOT NULL AND lent_owner IS NOT NULL AND lent_owner = owner_id))
);
CREATE INDEX IF NOT EXISTS browser_profiles_owner_id ON browser_profiles (owner_id);
CREATE UNIQUE INDEX IF NOT EXISTS browser_profiles_owner_name ON browser_profiles (owner_id, lower(name));
