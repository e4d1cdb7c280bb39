export { type HeldRow, type HeldSlot, heldRowsQuery, heldSlotOf, heldSlots } from "./held-slots.js";
export {
  claimLedgerSlot,
  claimLedgerSlots,
  type LedgerClaim,
  type LedgerScope,
  type LedgerSlotClaim,
} from "./ledger-claim.js";
export { type ParentMap, resolveParents } from "./parent-resolution.js";
