/**
 * Migration 5 (MIGRATIONS, migrations.ts): the index of the order of last change (sort=updated),
 * so that a page of it is one range scan of (notebook, modified, id, position), not a sort of
 * the notebook. A note whose id is not a number (NULL) is indexed as Infinity, after every
 * numeric id of the same ms, as ChangeKey orders it; the expression is exactly the one the
 * queries of change-pages.ts sort and compare by, so the planner matches them.
 */
export const CHANGE_ORDER_MIGRATION: { version: number; sql: string } = {
  version: 5,
  sql: `
CREATE INDEX notes_by_change
  ON notes (notebook, modified, (coalesce(id, 'Infinity'::double precision)), position);
`,
}
