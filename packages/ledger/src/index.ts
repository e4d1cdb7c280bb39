export { claimLedgerSlot, type LedgerClaim, type LedgerScope } from "./ledger-claim.js";
export { type ParentMap, resolveParents } from "./parent-resolution.js";
