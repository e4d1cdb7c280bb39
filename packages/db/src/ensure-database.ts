import postgres from "postgres";

/**
 * Creates the database named in `url` when it does not exist yet, so a first start on a fresh
 * Postgres needs no manual step. Connects to the server's `postgres` database to do it.
 */
export async function ensureDatabase(url: string): Promise<boolean> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ""));
  if (!name) throw new Error(`DATABASE_URL ${url} names no database`);
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    const [exists] = await sql`select 1 from pg_database where datname = ${name}`;
    if (exists) return false;
    try {
      await sql.unsafe(`create database "${name.replace(/"/g, '""')}"`);
    } catch (err) {
      // 42P04: another process created it a moment ago.
      if ((err as { code?: string }).code !== "42P04") throw err;
    }
    return true;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
