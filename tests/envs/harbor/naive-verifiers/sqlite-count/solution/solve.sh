sqlite3 /app/db.sqlite 'create table t(x); insert into t values (1), (2), (3);'
