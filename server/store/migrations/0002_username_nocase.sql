-- Usernames are unique case-insensitively: "Alice" and "alice" are one account.
-- A database from before this rule may hold such pairs: the oldest keeps its name and every
-- later one is renamed to "<name>~<id>" ('~' is never in a username, so the new name is free
-- and cannot be chosen by anyone). An admin can then rename or delete them.
UPDATE users SET username = username || '~' || id
WHERE EXISTS (
    SELECT 1 FROM users o
    WHERE lower(o.username) = lower(users.username)
      AND (o.created_at < users.created_at OR (o.created_at = users.created_at AND o.id < users.id))
);
CREATE UNIQUE INDEX users_username_lower ON users (lower(username));
