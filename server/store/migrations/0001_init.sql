-- Porthole schema, version 1. The same SQL runs on SQLite and PostgreSQL:
-- ids and hashes are TEXT, times are unix microseconds in BIGINT, booleans are
-- INTEGER 0/1, JSON documents (permissions, backend) are TEXT.

CREATE TABLE users (
    id            TEXT    NOT NULL PRIMARY KEY,
    username      TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    admin         INTEGER NOT NULL DEFAULT 0,
    permissions   TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL
);

-- hash: hex SHA-256 of the session cookie value.
CREATE TABLE sessions (
    hash       TEXT   NOT NULL PRIMARY KEY,
    user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

CREATE TABLE agents (
    id         TEXT   NOT NULL PRIMARY KEY,
    owner_id   TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    backend    TEXT   NOT NULL,
    share      TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX agents_owner_id ON agents (owner_id);
CREATE INDEX agents_created_at ON agents (created_at);

-- hash: hex SHA-256 of the token secret.
CREATE TABLE agent_tokens (
    id         TEXT   NOT NULL PRIMARY KEY,
    agent_id   TEXT   NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    hash       TEXT   NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE INDEX agent_tokens_agent_id ON agent_tokens (agent_id);

-- No foreign keys: audit rows outlive the users and agents they name.
-- id comes from counters('audit') so that both databases number rows the same way.
CREATE TABLE audit (
    id         BIGINT NOT NULL PRIMARY KEY,
    created_at BIGINT NOT NULL,
    actor      TEXT   NOT NULL DEFAULT '',
    action     TEXT   NOT NULL,
    agent_id   TEXT   NOT NULL DEFAULT '',
    surface    TEXT   NOT NULL DEFAULT '',
    mode       TEXT   NOT NULL DEFAULT '',
    detail     TEXT   NOT NULL DEFAULT '',
    remote     TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX audit_agent_id ON audit (agent_id, id);

CREATE TABLE counters (
    name  TEXT   NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('audit', 0);
