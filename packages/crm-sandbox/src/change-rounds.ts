import { MAX_CHANGE_ROUNDS, MAX_CHANGES, type ResolvedOptions } from "./options.js";
import type { RowKind } from "./rows.js";

/**
 * The customer at work during a run: the rounds of changes applied so far, and which rows each one
 * added, edited and deleted. Pure functions of the options and the round times, like the dataset:
 * nothing but the rounds' times and the rows they may delete (drawn once) is stored.
 *
 * `changeEdits` rows per kind get a new name or title and a fresh update_time, `changeAdds` rows per
 * kind appear after the last one, and `changeDeletes` rows per kind are deleted: a deal keeps being
 * listed with status=deleted (update_time = the deletion); any other row leaves every list, as
 * Pipedrive's lists leave out what was deleted, and only a GET by id still finds it, marked deleted
 * (a lead, which Pipedrive deletes outright: 404). Applied once, unless another round is asked for
 * (a customer still at work while a run follows the account): each round edits the same rows again
 * (" (edited 2)", …), adds rows of its own and deletes other rows, all at its own time. At most
 * MAX_CHANGE_ROUNDS rounds.
 */
export class ChangeRounds {
  /** When each round of changes was applied, oldest first (the first is the mid-run change set). */
  private readonly rounds: number[] = [];
  /** Rows the rounds delete per kind, `changeDeletes` per round in order; drawn once. */
  private readonly deletable = new Map<RowKind, number[]>();
  /** Per kind, the ids the applied rounds deleted, as a set (rebuilt when a round applies). */
  private goneSets: Map<RowKind, Set<number>> | undefined;

  constructor(
    private readonly opts: Pick<ResolvedOptions, "changeAdds" | "changeEdits" | "changeDeletes">,
    /** What was generated: times and references are computed against these, so a round never moves them. */
    private readonly base: Readonly<Record<RowKind, number>>,
    /** Rows no round deletes: already deleted or archived when generated, or malformed. */
    private readonly excluded: (kind: RowKind, id: number) => boolean,
  ) {}

  /** When the latest round of changes was applied; null until the first. */
  get latestMs(): number | null {
    return this.rounds.at(-1) ?? null;
  }

  /** When round `round` (0-based) was applied. */
  roundMs(round: number): number {
    return this.rounds[round] as number;
  }

  /** How many rounds of changes were applied. */
  get count(): number {
    return this.rounds.length;
  }

  /** Applies a round at `nowMs`; false when none may be (one already, unless `again`; the last allowed). */
  apply(nowMs: number, again: boolean): boolean {
    if (this.rounds.length > 0 && !again) return false;
    if (this.rounds.length >= MAX_CHANGE_ROUNDS) return false;
    if ((this.rounds.length + 1) * this.opts.changeAdds > MAX_CHANGES) return false;
    // Pipedrive's times are whole seconds apart at best; a round never shares its time with the last.
    this.rounds.push(Math.max(nowMs, (this.rounds.at(-1) ?? 0) + 1));
    this.goneSets = undefined;
    return true;
  }

  /** The round (0-based) in which this row was added; undefined for a generated row. */
  addedRound(kind: RowKind, id: number): number | undefined {
    if (id <= this.base[kind] || this.opts.changeAdds === 0) return undefined;
    return Math.floor((id - this.base[kind] - 1) / this.opts.changeAdds);
  }

  /**
   * Rows the rounds delete: from the last generated row down, skipping rows already deleted,
   * archived, edited by the change set or malformed, so each change a round makes is one of a kind.
   */
  private deletableRows(kind: RowKind): number[] {
    let out = this.deletable.get(kind);
    if (!out) {
      out = [];
      const wanted = this.opts.changeDeletes * MAX_CHANGE_ROUNDS;
      for (let id = this.base[kind]; id >= 1 && out.length < wanted; id--) {
        if (this.excluded(kind, id) || this.isEdited(kind, id)) continue;
        out.push(id);
      }
      this.deletable.set(kind, out);
    }
    return out;
  }

  /** The round (0-based) in which this row was deleted; undefined when no round deleted it. */
  deletedRound(kind: RowKind, id: number): number | undefined {
    if (this.opts.changeDeletes === 0 || this.rounds.length === 0 || id > this.base[kind]) return undefined;
    const at = this.deletableRows(kind).indexOf(id);
    if (at < 0) return undefined;
    const round = Math.floor(at / this.opts.changeDeletes);
    return round < this.rounds.length ? round : undefined;
  }

  /** Rows of `kind` the applied rounds deleted, as 1-based ids (lead positions + 1). */
  deletedByChanges(kind: RowKind = "deals"): number[] {
    if (this.opts.changeDeletes === 0) return [];
    return this.deletableRows(kind).slice(0, this.opts.changeDeletes * this.rounds.length);
  }

  /**
   * A row a round deleted that no list shows any more (every kind but deals, which stay listed
   * with status=deleted): a GET by id still answers it, marked deleted, for 30 days.
   */
  isGone(kind: RowKind, id: number): boolean {
    if (kind === "deals" || this.opts.changeDeletes === 0 || this.rounds.length === 0) return false;
    if (!this.goneSets) this.goneSets = new Map();
    let set = this.goneSets.get(kind);
    if (!set) {
      set = new Set(this.deletedByChanges(kind));
      this.goneSets.set(kind, set);
    }
    return set.has(id);
  }

  /** When a row was last changed by a round of changes; undefined for a row no round touched. */
  changedMs(kind: RowKind, id: number): number | undefined {
    if (this.rounds.length === 0) return undefined;
    const added = this.addedRound(kind, id);
    if (added !== undefined) return this.rounds[added];
    const deleted = this.deletedRound(kind, id);
    if (deleted !== undefined) return this.rounds[deleted];
    return this.isEdited(kind, id) ? this.rounds.at(-1) : undefined;
  }

  /** 1-based ids (lead positions + 1) the change set edits: spread evenly over the generated rows. */
  editedIds(kind: RowKind): number[] {
    if (this.latestMs === null) return [];
    const n = this.base[kind];
    const e = Math.min(this.opts.changeEdits, n);
    return Array.from({ length: e }, (_, i) => 1 + Math.floor((i * n) / e));
  }

  /**
   * What one applied round (0-based) changed in `kind`, as 1-based ids (lead positions + 1): the
   * rows it added, the rows it edited (every round edits the same rows again) and the rows it
   * deleted. The webhooks a round sends are these (webhooks.ts).
   */
  roundChanges(kind: RowKind, round: number): { created: number[]; changed: number[]; deleted: number[] } {
    if (round < 0 || round >= this.rounds.length) return { created: [], changed: [], deleted: [] };
    const adds = this.opts.changeAdds;
    const first = this.base[kind] + round * adds;
    const n = this.base[kind];
    const e = Math.min(this.opts.changeEdits, n);
    return {
      created: Array.from({ length: adds }, (_, i) => first + i + 1),
      changed: Array.from({ length: e }, (_, i) => 1 + Math.floor((i * n) / e)),
      deleted: this.deletedByChanges(kind).slice(
        round * this.opts.changeDeletes,
        (round + 1) * this.opts.changeDeletes,
      ),
    };
  }

  /** Rows the applied rounds added to `kind`, as 1-based ids. */
  addedIds(kind: RowKind): number[] {
    const n = this.base[kind];
    return Array.from({ length: this.opts.changeAdds * this.rounds.length }, (_, i) => n + i + 1);
  }

  isEdited(kind: RowKind, id: number): boolean {
    if (this.latestMs === null || id > this.base[kind]) return false;
    const n = this.base[kind];
    const e = Math.min(this.opts.changeEdits, n);
    if (e === 0) return false;
    // Inverse of editedIds: id = 1 + floor(i n / e) for some i.
    const i = Math.ceil(((id - 1) * e) / n);
    return i < e && 1 + Math.floor((i * n) / e) === id;
  }
}
