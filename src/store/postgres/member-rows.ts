import type pg from 'pg'
import type { Access, Member, Role } from '../directory.js'
import type { MembersSnapshot } from '../kernel/notebook-rules.js'

/*
 * The rows of the directory's notebooks and members (migrations 4 and 8, directory-schema.ts) as
 * the directory's acts and the guarded writes read and write them.
 */

interface NotebookRow {
  id: string
  name: string
  store: string
  default_user: string | null
}

/** A notebook locked by an act (FOR UPDATE), with its members in the order they joined. */
export interface Locked extends MembersSnapshot {
  readonly row: NotebookRow
  readonly members: readonly Member[]
}

/** A membership as access() answers it: `since` only when the row knows where it began. */
export function accessOf(id: string, store: string, role: Role, since: string | null): Access {
  return since === null ? { id, store, role } : { id, store, role, since }
}

/**
 * The role `user` holds now in the notebook kept under `store`, read with their member row locked
 * FOR SHARE until the transaction `tx` ends: a guarded write runs it first, so a removal or
 * demotion of them waits for the write to commit, or the write waits and reads what it left.
 */
export async function writerRole(
  tx: pg.ClientBase,
  store: string,
  user: string,
): Promise<Role | undefined> {
  const { rows } = await tx.query<{ role: Role }>(
    `SELECT m.role FROM notes_directory d
    JOIN notes_members m ON m.notebook = d.id AND m.sub = $2
    WHERE d.store = $1 FOR SHARE OF m`,
    [store, user],
  )
  return rows[0]?.role
}

/** Notebook `id` locked in `tx` (FOR UPDATE) with its members; undefined when there is none. */
export async function lockNotebook(tx: pg.ClientBase, id: string): Promise<Locked | undefined> {
  const { rows } = await tx.query<NotebookRow>(
    'SELECT id, name, store, default_user FROM notes_directory WHERE id = $1 FOR UPDATE',
    [id],
  )
  const row = rows[0]
  if (row === undefined) return undefined
  const { rows: members } = await tx.query<{ sub: string; role: Role }>(
    'SELECT sub, role FROM notes_members WHERE notebook = $1 ORDER BY joined',
    [id],
  )
  return {
    row,
    members: members.map(({ sub, role }) => ({ user: sub, role })),
    roles: new Map(members.map(({ sub, role }) => [sub, role])),
    defaultUser: row.default_user ?? undefined,
  }
}

/**
 * Adds `user` with `role` and, for a join, `since` (where the membership began), or changes their
 * role: they keep their place in the join order and where their membership began.
 */
export async function putMember(
  tx: pg.ClientBase,
  id: string,
  user: string,
  role: Role,
  since?: string,
): Promise<void> {
  await tx.query(
    `INSERT INTO notes_members (notebook, sub, role, since) VALUES ($1, $2, $3, $4)
    ON CONFLICT (notebook, sub) DO UPDATE SET role = EXCLUDED.role`,
    [id, user, role, since ?? null],
  )
}
