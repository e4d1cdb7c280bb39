import type { TaskSeed } from "@drover/provider-sdk";
import type { PgTableConfig } from "./config.js";
import type { SlotCursor } from "./source-table.js";

export const PG_TABLE_KIND = "rows";

/** The run's slots, oldest first: [from, from + width), ..., the last one cut at `to`. */
export function slotsOf(config: PgTableConfig): SlotCursor[] {
  const slots: SlotCursor[] = [];
  for (let from = config.from; from < config.to; from += config.slotMs)
    slots.push({ from, to: Math.min(from + config.slotMs, config.to) });
  return slots;
}

export function slotName(slot: { from: number }): string {
  return new Date(slot.from).toISOString();
}

/**
 * One task per slot, newest first, so recent data (what users look at first) lands first: the dispatcher
 * publishes pending tasks in id order, and ids follow this order.
 */
export function slotSeeds(config: PgTableConfig): TaskSeed[] {
  return slotsOf(config)
    .reverse()
    .map((slot) => ({ kind: PG_TABLE_KIND, seedKey: `slot:${slotName(slot)}`, cursor: { ...slot } }));
}
