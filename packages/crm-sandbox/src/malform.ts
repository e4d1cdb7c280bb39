export type Row = Record<string, unknown>;

type Mutation = (row: Row) => void;

const notADate =
  (field: string): Mutation =>
  (row) => {
    row[field] = "not-a-date";
  };
const garbage =
  (field: string): Mutation =>
  (row) => {
    row[field] = "garbage";
  };
const numeric =
  (field: string): Mutation =>
  (row) => {
    row[field] = 12345;
  };
const missing =
  (field: string): Mutation =>
  (row) => {
    delete row[field];
  };

// Each kind breaks the way real exports break: wrong types, absent required fields, junk references.
// None of them touches `id`: a consumer must be able to report exactly which record was bad.
export const MUTATIONS = {
  organizations: [numeric("name"), missing("name"), notADate("add_time"), garbage("owner_id")],
  persons: [
    numeric("name"),
    (row) => {
      row.email = [{ label: "work", value: "not-an-email", primary: true }];
    },
    garbage("org_id"),
    notADate("add_time"),
  ],
  deals: [
    numeric("title"),
    missing("title"),
    garbage("org_id"),
    notADate("add_time"),
    (row) => {
      row.value = "lots";
    },
  ],
  leads: [numeric("title"), garbage("organization_id"), notADate("add_time")],
  activities: [numeric("subject"), notADate("due_date"), garbage("deal_id")],
  notes: [numeric("content"), notADate("add_time"), garbage("deal_id")],
  mail: [numeric("subject"), notADate("message_time")],
} satisfies Record<string, Mutation[]>;

export type MalformableKind = keyof typeof MUTATIONS;

/** Applies one mutation picked by `pick` in [0, 1); returns a copy so clean rows stay reusable. */
export function malform(kind: MalformableKind, row: Row, pick: number): Row {
  const mutations: Mutation[] = MUTATIONS[kind];
  const copy = { ...row };
  mutations[Math.floor(pick * mutations.length)]?.(copy);
  return copy;
}
