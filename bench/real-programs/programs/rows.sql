-- An in-memory database of @ROWS@ rows: bulk insert, two indexes, updates, deletes,
-- grouped queries and a self-join. The suite replaces @ROWS@ and feeds this to
-- `sqlite3 :memory:` on stdin.
PRAGMA cache_size = -1000000;
CREATE TABLE events(id INTEGER PRIMARY KEY, k TEXT, g INTEGER, v REAL, s TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < @ROWS@)
INSERT INTO events
SELECT x,
       printf('key%09d', (x * 7919) % (@ROWS@ / 3 + 1)),
       (x * 31) % 1000,
       ((x * 37) % 10007) / 10.0,
       substr('lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod', 1 + x % 40, 8 + x % 24)
FROM c;
CREATE INDEX events_k ON events(k);
CREATE INDEX events_g_v ON events(g, v);
UPDATE events SET v = v * 1.5, s = s || '!' WHERE g % 7 = 0;
UPDATE events SET k = k || 'x' WHERE id % 11 = 0;
DELETE FROM events WHERE id % 13 = 0;
SELECT count(*), count(DISTINCT k), round(sum(v), 1) FROM events;
SELECT g, count(*), round(avg(v), 3), max(s) FROM events GROUP BY g ORDER BY count(*) DESC, g LIMIT 10;
SELECT count(*) FROM events a JOIN events b ON a.k = b.k AND a.id < b.id;
SELECT s, count(*) FROM events GROUP BY s ORDER BY 2 DESC, 1 LIMIT 5;
CREATE TABLE summary AS SELECT g, group_concat(id) AS ids FROM events WHERE v > 900 GROUP BY g;
SELECT count(*), sum(length(ids)) FROM summary;
