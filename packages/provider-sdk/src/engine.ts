/**
 * What the engine, the coordinator and the worker use to drive sources and that no source needs:
 * the taxonomy's internals (how a failure is classified, described and redacted, the destination's
 * own stalls) and the daily-reset probing schedule. Sources import `@drover/provider-sdk` only.
 */

export {
  FIRST_PROBE_MS,
  MAX_PROBE_MS,
  nextProbeDelayMs,
  nextResetAtPhase,
  phaseOf,
  RESET_CANDIDATES_PER_DAY,
} from "./daily-reset.js";
export {
  DestinationSchemaError,
  type DestinationSchemaFault,
  type DestinationStall,
  DestinationStallError,
  DroverError,
  describeError,
  describeSchemaFault,
  describeStall,
  destinationSchemaFault,
  destinationTimeout,
  repeatsInPlace,
} from "./errors.js";
export { MIN_REDACTED_SECRET_LENGTH, redactSecret } from "./secret-text.js";
