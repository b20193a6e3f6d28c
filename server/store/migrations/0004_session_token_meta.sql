-- Sessions remember which browser logged in and from which address (the account page lists
-- them); agent tokens get a name for people; the audit log is filtered by actor.
ALTER TABLE sessions ADD COLUMN user_agent TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN remote TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_actor ON audit (actor, id);
