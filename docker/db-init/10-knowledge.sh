#!/bin/sh
# Run once by the postgres image when its data folder is new (/docker-entrypoint-initdb.d/), as the
# superuser POSTGRES_USER in the database POSTGRES_DB: the product's own role `knowledge` (password
# DB_PASSWORD) owns that database, and pgvector's extension is there already -- a superuser's statement,
# so the product's role needs no superuser rights (docs/team.md, "The database").
set -eu
: "${DB_PASSWORD:?DB_PASSWORD (the password of the role knowledge) is not set}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -v pw="$DB_PASSWORD" <<'SQL'
CREATE EXTENSION IF NOT EXISTS vector;
CREATE ROLE knowledge LOGIN PASSWORD :'pw';
SELECT format('ALTER DATABASE %I OWNER TO knowledge', current_database()) \gexec
SQL
